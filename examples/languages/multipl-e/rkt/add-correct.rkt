#lang racket

;; Add two numbers x and y
;; >>> (add 2 3)
;; 5
;; >>> (add 5 7)
;; 12
(define (add x y)
  (+ x y))

(require rackunit)

(define (test-humaneval) 

  (let (( candidate add))
    (check-within (candidate 0 1) 1 0.001)
    (check-within (candidate 1 0) 1 0.001)
    (check-within (candidate 2 3) 5 0.001)
    (check-within (candidate 5 7) 12 0.001)
    (check-within (candidate 7 5) 12 0.001)
))

(test-humaneval)
#lang racket/base
;; Probe: start sleeping children without bound; when a start fails,
;; "contained".
(let loop ([n 0])
  (define started
    (with-handlers ([exn:fail? (lambda (e) #f)])
      (let-values ([(p out in err) (subprocess #f #f #f "/bin/sleep" "5")]) #t)))
  (cond
    [(not started) (displayln "contained")]
    [(> n 100000) (displayln "not contained") (exit 1)]
    [else (loop (add1 n))]))

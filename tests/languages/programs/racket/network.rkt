#lang racket/base
;; Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9.
(require racket/tcp)
(define (reach host port)
  (with-handlers ([exn:fail? (lambda (e) #f)])
    (define-values (in out) (tcp-connect host port))
    #t))
(displayln (if (or (reach "1.1.1.1" 53) (reach "127.0.0.1" 9)) "reachable" "unreachable"))

#lang racket/base
;; Probe: keep 1 MiB byte strings without bound.
(let loop ([keep '()])
  (loop (cons (make-bytes (* 1024 1024) 1) keep)))

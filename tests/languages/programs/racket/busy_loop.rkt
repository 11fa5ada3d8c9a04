#lang racket/base
;; Probe: spin forever on the CPU.
(let loop () (loop))

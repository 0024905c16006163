# Prints a greeting and the virtual time, then halts with interrupts off.
    .code64
    .text
    .globl _start
_start:
    lea msg(%rip), %rsi
    call puts
    call vtime
    call puthex
    mov $10, %al
    call putc
1:  hlt
    jmp 1b
msg: .asciz "hello from a 64-bit guest at t="
    .include "common.inc"

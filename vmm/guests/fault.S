# Prints, then raises #UD with an empty IDT: the CPU cannot deliver the
# exception, nor the double fault after it, and shuts down (a triple fault,
# KVM_EXIT_SHUTDOWN): the machine resets.
    .code64
    .text
    .globl _start
_start:
    lea msg(%rip), %rsi
    call puts
    lidt empty_idt(%rip)
    ud2
1:  hlt
    jmp 1b
msg: .asciz "about to fault\n"
    .balign 8
empty_idt:
    .word 0
    .quad 0
    .include "common.inc"

# Exit benchmark: writes the serial scratch register forever (one exit per iteration).
    .code64
    .text
    .globl _start
_start:
    mov $0x3ff, %dx
    xor %eax, %eax
1:  out %al, %dx
    inc %eax
    jmp 1b

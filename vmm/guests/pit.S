# Legacy PIC + PIT guest: the tick a stock Linux kernel uses with `noapic nolapic`.
#  1. programs both 8259As as Linux does (vector bases 0x30/0x38, cascade on IRQ 2),
#     masks all but IRQ 0, installs a gate for vector 0x30;
#  2. programs PIT channel 0 in mode 2 with count 1193 (about 1 ms);
#  3. NTICKS times: halts until the tick; the handler counts it, prints the virtual
#     time and sends a non-specific EOI;
#  4. powers off with status 0.
    .code64
    .text
    .globl _start
    .set NTICKS, 5
    .set TICKS, 0x300000
_start:
    movq $0, TICKS
    lea tick(%rip), %rax
    mov $0x30, %edi
    call set_gate
    mov $0x11, %al                   # ICW1: edge, cascade, ICW4
    out %al, $0x20
    out %al, $0xa0
    mov $0x30, %al                   # ICW2: vector bases
    out %al, $0x21
    mov $0x38, %al
    out %al, $0xa1
    mov $0x04, %al                   # ICW3: slave on IRQ 2
    out %al, $0x21
    mov $0x02, %al
    out %al, $0xa1
    mov $0x01, %al                   # ICW4: 8086 mode
    out %al, $0x21
    out %al, $0xa1
    mov $0xfe, %al                   # only IRQ 0
    out %al, $0x21
    mov $0xff, %al
    out %al, $0xa1
    mov $0x34, %al                   # PIT ch0, lo/hi, mode 2
    out %al, $0x43
    mov $1193 & 0xff, %al
    out %al, $0x40
    mov $1193 >> 8, %al
    out %al, $0x40
    sti
1:  hlt
    cmpq $NTICKS, TICKS
    jb 1b
    cli
    lea done(%rip), %rsi
    call puts
    xor %eax, %eax
    call poweroff

tick:
    push %rax
    push %rsi
    incq TICKS
    lea t(%rip), %rsi
    call puts
    call vtime
    call puthex
    mov $10, %al
    call putc
    mov $0x20, %al                   # non-specific EOI
    out %al, $0x20
    pop %rsi
    pop %rax
    iretq

t:      .asciz "tick t="
done:   .asciz "pit ok\n"
    .include "common.inc"

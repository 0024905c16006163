# Timer and interrupt test guest.
#  1. installs an interrupt gate for vector 0x20 (the pvclock timer);
#  2. NTICKS times: does some memory work (xorshift fill of 4 KiB, checksum printed),
#     halts until the 1 ms timer fires; the handler prints the tick and virtual time
#     and re-arms;
#  3. with interrupts masked, arms the timer at 0 ns and prints (the VMM must hold the
#     interrupt), then sti: the VMM sees the interrupt window and injects (on VMX/SVM
#     right after sti; under PVM at the next exit, hence the clock read after sti);
#  4. powers off with status 0 (1 if the tick count is wrong).
    .code64
    .text
    .globl _start
    .set NTICKS, 5
    .set TICKS, 0x300000
    .set SEED, 0x300008
    .set BUF, 0x200000
_start:
    movq $0, TICKS
    movabs $0x9e3779b97f4a7c15, %rax
    mov %rax, SEED
    lea tick_handler(%rip), %rax
    mov $0x20, %edi              # vector
    call set_gate
    lea hello(%rip), %rsi
    call puts
    mov $1000000, %eax
    call arm_timer
    sti
main_loop:
    call work
    hlt
    cmpq $NTICKS, TICKS
    jb main_loop
    cli
    xor %eax, %eax
    call arm_timer
    lea masked(%rip), %rsi
    call puts
    sti
    nop
    call vtime                      # an exit: PVM opens the window only at an exit
    cmpq $NTICKS+1, TICKS
    jne fail
    lea done(%rip), %rsi
    call puts
    xor %eax, %eax
    call poweroff
fail:
    mov $1, %eax
    call poweroff

# work: xorshift64 over 512 qwords at BUF, print their sum.
work:
    push %rax
    push %rbx
    push %rcx
    push %rdi
    mov SEED, %rax
    mov $BUF, %rdi
    mov $512, %ecx
    xor %ebx, %ebx
1:  mov %rax, %rdx
    shl $13, %rdx
    xor %rdx, %rax
    mov %rax, %rdx
    shr $7, %rdx
    xor %rdx, %rax
    mov %rax, %rdx
    shl $17, %rdx
    xor %rdx, %rax
    mov %rax, (%rdi)
    add %rax, %rbx
    add $8, %rdi
    dec %ecx
    jnz 1b
    mov %rax, SEED
    lea workmsg(%rip), %rsi
    call puts
    mov %rbx, %rax
    call puthex
    mov $10, %al
    call putc
    pop %rdi
    pop %rcx
    pop %rbx
    pop %rax
    ret

tick_handler:
    push %rax
    push %rsi
    push %rdx
    incq TICKS
    lea tickmsg(%rip), %rsi
    call puts
    mov TICKS, %rax
    call puthex
    lea atmsg(%rip), %rsi
    call puts
    call vtime
    call puthex
    mov $10, %al
    call putc
    cmpq $NTICKS, TICKS
    jae 1f
    mov $1000000, %eax
    call arm_timer
1:  pop %rdx
    pop %rsi
    pop %rax
    iretq

hello:   .asciz "timer guest\n"
workmsg: .asciz "work "
tickmsg: .asciz "tick "
atmsg:   .asciz " t="
masked:  .asciz "masked\n"
done:    .asciz "done\n"
    .include "common.inc"

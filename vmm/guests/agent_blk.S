# Engine-agent guest with a disk: a microVM node that speaks the engine's
# control-line protocol (agent.inc) and, on its workload command, writes through
# virtio-blk (window 1, 0xd0001000, vector 0x36; vmm/src/kvm/node.rs) to disksim:
#  1. driver init of the control line and the disk; "@sim ready\n";
#  2. halts until a command arrives ("run workload\n");
#  3. W0: 1 sector of 'A' at sector 0; waits; FLUSH; waits; W2: 1 sector of 'B' at
#     sector 8; waits; reads sector 0 back and checks it is 'A' and every status;
#  4. prints "disk ok", answers "@sim done workload 0\n" and idles for good.
# Any protocol error powers off with 1.
    .code64
    .text
    .globl _start
    .set VIRTIO, 0xd0001000
    .set IRQS, 0x300000
    .set BLKQ, 0x400000              # desc table; avail at +0x1000, used at +0x2000
    .set HDRS, 0x420000              # request headers, 16 bytes each
    .set STATS, 0x421000             # status bytes, one per request
    .set DATA, 0x430000              # 'A' at +0, 'B' at +0x1000, read buffer at +0x4000
    .set QSIZE, 32
    .set T_IN, 0
    .set T_OUT, 1
    .set T_FLUSH, 4
_start:
    movq $0, IRQS
    lea virtio_irq(%rip), %rax
    mov $0x36, %edi
    call set_gate
    call ctl_init
    call blk_init
    mov $DATA, %edi
    mov $'A', %al
    mov $512, %ecx
    rep stosb
    mov $DATA+0x1000, %edi
    mov $'B', %al
    mov $512, %ecx
    rep stosb
    sti
    lea ready(%rip), %rsi
    mov $ready_len, %ecx
    call ctl_send
1:  cli
    call ctl_got_cmd
    jne 2f
    sti
    hlt
    jmp 1b
2:  sti
    cmpb $0x72, CRXBUF               # 'r' of "run workload\n"
    jne fail
    mov $VIRTIO, %ebx
    # W0.
    xor %edi, %edi
    mov $T_OUT, %eax
    xor %edx, %edx
    mov $DATA, %esi
    mov $512, %ecx
    xor %r8d, %r8d
    call req
    movl $0, 0x50(%rbx)
    mov $1, %eax
    call wait_used
    # FLUSH.
    mov $1, %edi
    mov $T_FLUSH, %eax
    xor %edx, %edx
    xor %ecx, %ecx
    call req
    movl $0, 0x50(%rbx)
    mov $2, %eax
    call wait_used
    # W2 (stays volatile).
    mov $2, %edi
    mov $T_OUT, %eax
    mov $8, %edx
    mov $DATA+0x1000, %esi
    mov $512, %ecx
    xor %r8d, %r8d
    call req
    movl $0, 0x50(%rbx)
    mov $3, %eax
    call wait_used
    # Read sector 0.
    mov $3, %edi
    mov $T_IN, %eax
    xor %edx, %edx
    mov $DATA+0x4000, %esi
    mov $512, %ecx
    mov $2, %r8d
    call req
    movl $0, 0x50(%rbx)
    mov $4, %eax
    call wait_used
    cmpb $'A', DATA+0x4000
    jne fail
    cmpb $'A', DATA+0x41ff
    jne fail
    mov STATS, %eax                  # statuses of requests 0-3
    test %eax, %eax
    jnz fail
    lea ok(%rip), %rsi
    call puts
    lea done(%rip), %rsi
    mov $done_len, %ecx
    call ctl_send
3:  hlt
    jmp 3b
fail:
    mov $1, %eax
    call poweroff

ready:  .ascii "@sim ready\n"
    .set ready_len, . - ready
done:   .ascii "@sim done workload 0\n"
    .set done_len, . - done
ok:     .asciz "disk ok\n"
    .include "common.inc"
    .include "virtio.inc"
    .include "blk.inc"
    .include "agent.inc"

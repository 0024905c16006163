# Engine-agent guest whose last writes stay volatile, for the crash states of a
# KVM node's disk (checker/tests/kvm_engine.rs). The control line (agent.inc) and
# virtio-blk at 0xd0001000, vector 0x36 (vmm/src/kvm/node/layout.rs):
#  1. driver init of both devices; reads sectors 0-16 and prints what the disk holds:
#     "disk 0=X 1=X 8=X 16=X", each the sector's first byte ('.' for 0);
#     "@sim ready\n";
#  2. sector 0 holds 'A' (a boot after a power loss): prints "recovered" and idles
#     for good;
#  3. otherwise, on its command ("run workload\n"): W0, 2 sectors of 'A' at sector 0,
#     and W1, 'B' at sector 8; waits for both; FLUSH; waits; W3, 'C' at sector 16,
#     and W4, 'D' at sector 1; waits (these two stay volatile); reads sectors 0-1
#     back: 'A' then 'D' (the guest sees every write issued); checks every status;
#  4. prints "read back AD" and "@reached volatile", and never answers: it wakes
#     every millisecond on the timer (so the engine always has something due and a
#     crash can be chosen) until the engine cuts its power.
# Any protocol error powers off with 1.
    .code64
    .text
    .globl _start
    .set VIRTIO, 0xd0001000
    .set IRQS, 0x300000
    .set BLKQ, 0x400000              # desc table; avail at +0x1000, used at +0x2000
    .set HDRS, 0x420000              # request headers, 16 bytes each
    .set STATS, 0x421000             # status bytes, one per request
    .set DATA, 0x430000              # A, B, C, D at 4 KiB steps, read buffer at +0x4000
    .set RBUF, 0x500000              # what the disk held at boot, sectors 0-16
    .set QSIZE, 32
    .set T_IN, 0
    .set T_OUT, 1
    .set T_FLUSH, 4
_start:
    movq $0, IRQS
    lea virtio_irq(%rip), %rax
    mov $0x36, %edi
    call set_gate
    lea tick(%rip), %rax
    mov $0x20, %edi
    call set_gate
    call ctl_init
    call blk_init
    mov $DATA, %edi
    mov $'A', %al
    mov $1024, %ecx
    rep stosb
    mov $DATA+0x1000, %edi
    mov $'B', %al
    mov $512, %ecx
    rep stosb
    mov $DATA+0x2000, %edi
    mov $'C', %al
    mov $512, %ecx
    rep stosb
    mov $DATA+0x3000, %edi
    mov $'D', %al
    mov $512, %ecx
    rep stosb
    sti
    # Request 0: what the disk holds.
    xor %edi, %edi
    mov $T_IN, %eax
    xor %edx, %edx
    mov $RBUF, %esi
    mov $17*512, %ecx
    mov $2, %r8d
    call req
    movl $0, 0x50(%rbx)
    mov $1, %eax
    call wait_used
    cmpb $0, STATS
    jne fail
    lea disk0(%rip), %rsi
    call puts
    mov RBUF, %al
    call putsec
    lea disk1(%rip), %rsi
    call puts
    mov RBUF+512, %al
    call putsec
    lea disk8(%rip), %rsi
    call puts
    mov RBUF+8*512, %al
    call putsec
    lea disk16(%rip), %rsi
    call puts
    mov RBUF+16*512, %al
    call putsec
    mov $10, %al
    call putc
    lea ready(%rip), %rsi
    mov $ready_len, %ecx
    call ctl_send
    cmpb $'A', RBUF
    je recovered
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
    # W0, W1.
    mov $1, %edi
    mov $T_OUT, %eax
    xor %edx, %edx
    mov $DATA, %esi
    mov $1024, %ecx
    xor %r8d, %r8d
    call req
    mov $2, %edi
    mov $T_OUT, %eax
    mov $8, %edx
    mov $DATA+0x1000, %esi
    mov $512, %ecx
    call req
    movl $0, 0x50(%rbx)
    mov $3, %eax
    call wait_used
    # FLUSH.
    mov $3, %edi
    mov $T_FLUSH, %eax
    xor %edx, %edx
    xor %ecx, %ecx
    call req
    movl $0, 0x50(%rbx)
    mov $4, %eax
    call wait_used
    # W3, W4: they stay volatile.
    mov $4, %edi
    mov $T_OUT, %eax
    mov $16, %edx
    mov $DATA+0x2000, %esi
    mov $512, %ecx
    call req
    mov $5, %edi
    mov $T_OUT, %eax
    mov $1, %edx
    mov $DATA+0x3000, %esi
    mov $512, %ecx
    call req
    movl $0, 0x50(%rbx)
    mov $6, %eax
    call wait_used
    # Read sectors 0-1.
    mov $6, %edi
    mov $T_IN, %eax
    xor %edx, %edx
    mov $DATA+0x4000, %esi
    mov $1024, %ecx
    mov $2, %r8d
    call req
    movl $0, 0x50(%rbx)
    mov $7, %eax
    call wait_used
    cmpb $'A', DATA+0x4000
    jne fail
    cmpb $'A', DATA+0x41ff
    jne fail
    cmpb $'D', DATA+0x4200
    jne fail
    cmpb $'D', DATA+0x43ff
    jne fail
    mov STATS+1, %eax                # statuses of requests 1-4
    or STATS+3, %eax                 # and 3-6
    test %eax, %eax
    jnz fail
    lea readback(%rip), %rsi
    call puts
    lea reached(%rip), %rsi
    call puts
3:  mov $1000000, %eax
    call arm_timer
    hlt
    jmp 3b
recovered:
    lea recov(%rip), %rsi
    call puts
4:  hlt
    jmp 4b
fail:
    mov $1, %eax
    call poweroff

tick:
    iretq

# putsec: print %al, the first byte of a sector, as a character ('.' for 0).
putsec:
    test %al, %al
    jnz 1f
    mov $'.', %al
1:  jmp putc

ready:    .ascii "@sim ready\n"
    .set ready_len, . - ready
disk0:    .asciz "disk 0="
disk1:    .asciz " 1="
disk8:    .asciz " 8="
disk16:   .asciz " 16="
readback: .asciz "read back AD\n"
reached:  .asciz "@reached volatile\n"
recov:    .asciz "recovered\n"
    .include "common.inc"
    .include "virtio.inc"
    .include "blk.inc"
    .include "agent.inc"

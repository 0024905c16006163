# virtio-blk guest: writes, a flush, more writes, a read back, through disksim.
#  1. driver init over virtio-mmio at 0xd0001000 (device id 2): features FLUSH and
#     VERSION_1, request queue 0 of QSIZE entries, rings in guest memory;
#  2. W0: 2 sectors of 'A' at sector 0, W1: 1 sector of 'B' at sector 8; waits for both;
#  3. FLUSH; waits;
#  4. W3: 'C' at sector 16, W4: 'D' at sector 1; waits (these stay volatile);
#  5. reads sectors 0-1 back: 'A' then 'D' (the guest sees every write issued);
#  6. checks every status byte and powers off with 0 (1 on any error).
# Request k uses descriptors 3k.. (header, data, status); completions come with
# interrupt vector 0x32, acknowledged through InterruptACK.
    .code64
    .text
    .globl _start
    .set VIRTIO, 0xd0001000
    .set IRQS, 0x300000
    .set BLKQ, 0x400000             # desc table; avail at +0x1000, used at +0x2000
    .set HDRS, 0x420000             # request headers, 16 bytes each
    .set STATS, 0x421000            # status bytes, one per request
    .set DATA, 0x430000             # A, B, C, D at 4 KiB steps, read buffer at +0x4000
    .set QSIZE, 32
    .set T_IN, 0
    .set T_OUT, 1
    .set T_FLUSH, 4
_start:
    movq $0, IRQS
    lea virtio_irq(%rip), %rax
    mov $0x32, %edi              # vector
    call set_gate
    call blk_init
    sti
    # Data: 1024 x 'A', then 512 x 'B', 'C', 'D'.
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
    # W0, W1.
    xor %edi, %edi
    mov $T_OUT, %eax
    xor %edx, %edx
    mov $DATA, %esi
    mov $1024, %ecx
    xor %r8d, %r8d
    call req
    mov $1, %edi
    mov $T_OUT, %eax
    mov $8, %edx
    mov $DATA+0x1000, %esi
    mov $512, %ecx
    call req
    movl $0, 0x50(%rbx)             # QueueNotify
    mov $2, %eax
    call wait_used
    lea written(%rip), %rsi
    call puts
    # FLUSH.
    mov $2, %edi
    mov $T_FLUSH, %eax
    xor %edx, %edx
    xor %ecx, %ecx
    call req
    movl $0, 0x50(%rbx)
    mov $3, %eax
    call wait_used
    lea flushed(%rip), %rsi
    call puts
    # W3, W4.
    mov $3, %edi
    mov $T_OUT, %eax
    mov $16, %edx
    mov $DATA+0x2000, %esi
    mov $512, %ecx
    call req
    mov $4, %edi
    mov $T_OUT, %eax
    mov $1, %edx
    mov $DATA+0x3000, %esi
    mov $512, %ecx
    call req
    movl $0, 0x50(%rbx)
    mov $5, %eax
    call wait_used
    lea written(%rip), %rsi
    call puts
    # Read sectors 0-1.
    mov $5, %edi
    mov $T_IN, %eax
    xor %edx, %edx
    mov $DATA+0x4000, %esi
    mov $1024, %ecx
    mov $2, %r8d
    call req
    movl $0, 0x50(%rbx)
    mov $6, %eax
    call wait_used
    cmpb $'A', DATA+0x4000
    jne fail
    cmpb $'A', DATA+0x41ff
    jne fail
    cmpb $'D', DATA+0x4200
    jne fail
    cmpb $'D', DATA+0x43ff
    jne fail
    mov STATS, %eax                 # statuses of requests 0-3
    or STATS+2, %eax                # and 2-5
    test %eax, %eax
    jnz fail
    lea readback(%rip), %rsi
    call puts
    mov IRQS, %rax
    call puthex
    mov $10, %al
    call putc
    lea ok(%rip), %rsi
    call puts
    xor %eax, %eax
    call poweroff
fail:
    mov $1, %eax
    call poweroff

written:  .asciz "written\n"
flushed:  .asciz "flushed\n"
readback: .asciz "read back AD, irqs="
ok:       .asciz "blk ok\n"
    .include "common.inc"
    .include "virtio.inc"
    .include "blk.inc"

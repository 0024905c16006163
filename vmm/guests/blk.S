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
    mov $VIRTIO, %ebx
    cmpl $2, 8(%rbx)                # DeviceID: block
    jne fail
    movl $0, 0x70(%rbx)             # reset
    movl $3, 0x70(%rbx)             # ACKNOWLEDGE | DRIVER
    movl $0, 0x24(%rbx)
    movl $0x200, 0x20(%rbx)         # VIRTIO_BLK_F_FLUSH
    movl $1, 0x24(%rbx)
    movl $1, 0x20(%rbx)             # VIRTIO_F_VERSION_1
    movl $0xb, 0x70(%rbx)           # | FEATURES_OK
    testl $8, 0x70(%rbx)
    jz fail
    xor %edi, %edi                  # request queue 0
    mov $QSIZE, %edx
    mov $BLKQ, %esi
    call virtio_queue
    movl $0xf, 0x70(%rbx)           # | DRIVER_OK
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

# req: makes request %edi (k) available: type %eax, sector %rdx, data at %esi of
# %ecx bytes (0: no data), data descriptor flags %r8d (0: device reads, 2: writes).
# Chain: descriptors 3k (header), 3k+1 (data), then the status byte STATS+k.
req:
    mov %edi, %r9d
    shl $4, %r9d
    lea HDRS(%r9), %r10             # header
    mov %eax, (%r10)
    movl $0, 4(%r10)
    mov %rdx, 8(%r10)
    lea (%rdi,%rdi,2), %r11d        # head descriptor d = 3k
    mov %r11d, %r12d
    shl $4, %r12d
    add $BLKQ, %r12d                # &desc[d]
    mov %r10, (%r12)
    movl $16, 8(%r12)
    movw $1, 12(%r12)               # NEXT
    lea 1(%r11), %eax
    mov %ax, 14(%r12)
    add $16, %r12
    test %ecx, %ecx
    jz 1f
    mov %rsi, (%r12)
    mov %ecx, 8(%r12)
    mov %r8d, %eax
    or $1, %eax                     # | NEXT
    mov %ax, 12(%r12)
    lea 2(%r11), %eax
    mov %ax, 14(%r12)
    add $16, %r12
1:  lea STATS(%rdi), %rax
    movb $0xff, (%rax)
    mov %rax, (%r12)
    movl $1, 8(%r12)
    movw $2, 12(%r12)               # WRITE
    movw $0, 14(%r12)
    movzwl BLKQ+0x1002, %eax        # avail.idx
    mov %eax, %r9d
    and $QSIZE-1, %r9d
    mov %r11w, BLKQ+0x1004(,%r9,2)  # avail.ring[idx % QSIZE] = d
    inc %eax
    mov %ax, BLKQ+0x1002
    ret

# wait_used: halts until used.idx == %ax.
wait_used:
1:  cli
    cmpw %ax, BLKQ+0x2002
    je 2f
    sti
    hlt
    jmp 1b
2:  sti
    ret

written:  .asciz "written\n"
flushed:  .asciz "flushed\n"
readback: .asciz "read back AD, irqs="
ok:       .asciz "blk ok\n"
    .include "common.inc"
    .include "virtio.inc"

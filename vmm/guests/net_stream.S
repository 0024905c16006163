# virtio-net streaming guest: node 1 sends NFRAMES frames to node 2, which checks they
# arrive in order. NFRAMES is a u32 the host writes at 0x300010 before the run.
#  - sender (node 1): TX queue with VRING_AVAIL_F_NO_INTERRUPT (no completion
#    interrupts); one QueueNotify per frame, so one exit per frame; the device copies
#    each frame out during the notification, so descriptor (i mod QSIZE) is free again;
#  - receiver (node 2): QSIZE receive buffers of 2 KiB; halts until the used ring moves,
#    checks each frame's sequence number, re-posts the buffers and kicks RX once per
#    batch (frames that found no buffer wait in the VMM's backlog).
# Both print the count and power off with 0 (1 on any error).
    .code64
    .text
    .globl _start
    .set VIRTIO, 0xd0000000
    .set IRQS, 0x300000
    .set NFRAMES, 0x300010
    .set RXQ, 0x400000              # desc table; avail at +0x1000, used at +0x2000
    .set TXQ, 0x410000
    .set TXBUF, 0x420000
    .set RXBUF, 0x430000            # QSIZE buffers of 2 KiB
    .set QSIZE, 8
    .set HDR, 12
    .set FRAME, 60
_start:
    movq $0, IRQS
    lea virtio_irq(%rip), %rax
    mov $0x31, %edi              # vector
    call set_gate
    mov $VIRTIO, %ebx
    mov $RXQ, %esi
    call net_init
    sti
    xor %r13d, %r13d                # frames sent or received
    cmpb $1, 0x105(%rbx)            # mac[5]: node 1 sends
    jne recv

send:
    movw $1, TXQ+0x1000             # VRING_AVAIL_F_NO_INTERRUPT
    mov 0x100(%rbx), %eax
    movzwl 0x104(%rbx), %edx
    mov %eax, TXBUF+HDR             # dst: node 2
    movw $0x0200, TXBUF+HDR+4
    mov %eax, TXBUF+HDR+6           # src: us
    mov %dx, TXBUF+HDR+10
    movw $0xb588, TXBUF+HDR+12
1:  mov %r13d, TXBUF+HDR+14         # sequence number
    mov %r13d, %eax
    and $QSIZE-1, %eax
    mov %eax, %edx
    shl $4, %edx
    movq $TXBUF, TXQ(%rdx)
    movl $HDR+FRAME, TXQ+8(%rdx)
    movw $0, TXQ+12(%rdx)
    mov %ax, TXQ+0x1004(,%rax,2)    # avail.ring[i mod QSIZE] = i mod QSIZE
    lea 1(%r13), %eax
    mov %ax, TXQ+0x1002             # avail.idx
    movl $1, 0x50(%rbx)             # QueueNotify(TX)
    inc %r13d
    cmp NFRAMES, %r13d
    jb 1b
    jmp done

recv:
    xor %ecx, %ecx
1:  mov %ecx, %eax
    shl $11, %eax
    add $RXBUF, %eax
    mov %ecx, %edx
    shl $4, %edx
    mov %rax, RXQ(%rdx)
    movl $2048, RXQ+8(%rdx)
    movw $2, RXQ+12(%rdx)           # WRITE
    mov %cx, RXQ+0x1004(,%rcx,2)
    inc %ecx
    cmp $QSIZE, %ecx
    jb 1b
    movw $QSIZE, RXQ+0x1002
    movl $0, 0x50(%rbx)             # QueueNotify(RX)
    xor %r12d, %r12d                # used entries consumed
2:  cli
    cmpw %r12w, RXQ+0x2002
    jne 3f
    sti
    hlt
    jmp 2b
3:  sti
4:  cmpw %r12w, RXQ+0x2002
    je 5f
    mov %r12d, %eax
    and $QSIZE-1, %eax
    mov RXQ+0x2004(,%rax,8), %edx   # used.ring[..].id
    mov %edx, %eax
    shl $11, %eax
    cmp %r13d, RXBUF+HDR+14(%rax)   # in order
    jne fail
    inc %r13d
    movzwl RXQ+0x1002, %eax         # re-post the buffer
    mov %eax, %ecx
    and $QSIZE-1, %ecx
    mov %dx, RXQ+0x1004(,%rcx,2)
    inc %eax
    mov %ax, RXQ+0x1002
    inc %r12d
    jmp 4b
5:  movl $0, 0x50(%rbx)             # QueueNotify(RX): buffers are back
    cmp NFRAMES, %r13d
    jb 2b

done:
    lea count(%rip), %rsi
    call puts
    mov %r13, %rax
    call puthex
    mov $10, %al
    call putc
    xor %eax, %eax
    call poweroff
fail:
    mov $1, %eax
    call poweroff

count:  .asciz "frames "
    .include "common.inc"
    .include "virtio.inc"
    .include "net.inc"

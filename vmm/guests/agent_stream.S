# Engine-agent streaming guest: node 1 streams NFRAMES frames to node 2 through
# netsim; node 2, the workload node, checks they arrive in order. For engine-level
# tests and benchmarks of the KVM runtime (checker/tests/kvm_engine.rs,
# checker/benches/kvm_engine.rs). Devices as agent.S (vmm/src/kvm/node/layout.rs):
# virtio-net at 0xd0000000 (vector 0x35), the control line at 0xd0002000 (vector
# 0x37, agent.inc). NFRAMES (default 200) and SLEEP_NS (default 0) may be set with
# `as --defsym` (vmm::kvm::asm::assemble_with), and so may SEND_AFTER_NS (default
# 0): the sender's sleep on the timer between "@sim ready" and its first frame.
#  - both: driver init of both devices;
#  - sender (node 1): "@sim ready\n", then NFRAMES frames with sequence numbers 0, 1,
#    ..., on a TX queue with VRING_AVAIL_F_NO_INTERRUPT, one QueueNotify per frame (so
#    one exit per frame; the device copies each frame out during the notification, so
#    descriptor i mod QSIZE is free again); prints "sent N" and idles for good;
#  - receiver (node 2): posts QSIZE receive buffers of 2 KiB, "@sim ready\n"; with
#    SLEEP_NS > 0 it first sleeps that long on the timer (vector 0x20) without taking
#    a frame, so frames that find no free buffer wait in the VMM's backlog, and prints
#    "ring N" (the used entries waiting then: QSIZE once the ring is full); then
#    halts until the used ring moves, checks each frame's sequence number, re-posts
#    the buffers and kicks RX once per batch (the kick drains the backlog); after
#    NFRAMES frames and the command ("run workload\n") prints "frames N" and answers
#    "@sim done workload 0\n", then idles for good.
# Any protocol error (a frame out of order, another command) powers off with 1.
    .code64
    .text
    .globl _start
    .ifndef NFRAMES
    .set NFRAMES, 200
    .endif
    .ifndef SLEEP_NS
    .set SLEEP_NS, 0
    .endif
    .ifndef SEND_AFTER_NS
    .set SEND_AFTER_NS, 0
    .endif
    .set NET, 0xd0000000
    .set VIRTIO, NET                 # for virtio.inc's virtio_irq
    .set IRQS, 0x300000
    .set SLEPT, 0x300008
    .set DONE, 0x300010
    .set RXQ, 0x400000               # desc table; avail at +0x1000, used at +0x2000
    .set TXQ, 0x410000
    .set TXBUF, 0x420000
    .set RXBUF, 0x430000             # QSIZE buffers of 2 KiB
    .set QSIZE, 8
    .set HDR, 12                     # virtio-net header (VERSION_1)
    .set FRAME, 60
_start:
    movq $0, IRQS
    movq $0, SLEPT
    movq $0, DONE
    lea virtio_irq(%rip), %rax
    mov $0x35, %edi
    call set_gate
    lea tick(%rip), %rax
    mov $0x20, %edi
    call set_gate
    call ctl_init
    mov $NET, %ebx
    mov $RXQ, %esi
    call net_init
    sti
    xor %r13d, %r13d                 # frames sent or received
    cmpb $1, 0x105(%rbx)             # mac[5]: node 1 sends
    jne recv

send:
    lea ready(%rip), %rsi
    mov $ready_len, %ecx
    call ctl_send
    .if SEND_AFTER_NS
    mov $SEND_AFTER_NS, %eax
    call arm_timer
4:  cli
    cmpq $0, SLEPT
    jne 5f
    sti
    hlt
    jmp 4b
5:  sti
    xor %r13d, %r13d
    .endif
    mov $NET, %ebx
    movw $1, TXQ+0x1000              # VRING_AVAIL_F_NO_INTERRUPT
    mov 0x100(%rbx), %eax
    movzwl 0x104(%rbx), %edx
    mov %eax, TXBUF+HDR              # dst: node 2
    movw $0x0200, TXBUF+HDR+4
    mov %eax, TXBUF+HDR+6            # src: us
    mov %dx, TXBUF+HDR+10
    movw $0xb588, TXBUF+HDR+12
1:  mov %r13d, TXBUF+HDR+14          # sequence number
    mov %r13d, %eax
    and $QSIZE-1, %eax
    mov %eax, %edx
    shl $4, %edx
    movq $TXBUF, TXQ(%rdx)
    movl $HDR+FRAME, TXQ+8(%rdx)
    movw $0, TXQ+12(%rdx)
    mov %ax, TXQ+0x1004(,%rax,2)     # avail.ring[i mod QSIZE] = i mod QSIZE
    lea 1(%r13), %eax
    mov %ax, TXQ+0x1002              # avail.idx
    movl $1, 0x50(%rbx)              # QueueNotify(TX)
    inc %r13d
    cmp $NFRAMES, %r13d
    jb 1b
    lea sent(%rip), %rsi
    call puts
    mov %r13, %rax
    call puthex
    mov $10, %al
    call putc
idle:
    hlt
    jmp idle

recv:
    xor %ecx, %ecx
1:  mov %ecx, %eax
    shl $11, %eax
    add $RXBUF, %eax
    mov %ecx, %edx
    shl $4, %edx
    mov %rax, RXQ(%rdx)
    movl $2048, RXQ+8(%rdx)
    movw $2, RXQ+12(%rdx)            # WRITE
    mov %cx, RXQ+0x1004(,%rcx,2)
    inc %ecx
    cmp $QSIZE, %ecx
    jb 1b
    movw $QSIZE, RXQ+0x1002
    movl $0, 0x50(%rbx)              # QueueNotify(RX)
    lea ready(%rip), %rsi
    mov $ready_len, %ecx
    call ctl_send
    .if SLEEP_NS
    mov $SLEEP_NS, %eax
    call arm_timer
2:  cli
    cmpq $0, SLEPT
    jne 3f
    sti
    hlt
    jmp 2b
3:  sti
    lea ring(%rip), %rsi
    call puts
    movzwl RXQ+0x2002, %eax          # used.idx: frames waiting in the ring
    call puthex
    mov $10, %al
    call putc
    .endif
    mov $NET, %ebx
    xor %r12d, %r12d                 # used entries consumed
wait:
    cli
    cmpw %r12w, RXQ+0x2002
    jne take
    cmp $NFRAMES, %r13d
    jb 1f
    cmpq $0, DONE
    jne 1f
    call ctl_got_cmd
    je 1f
    cmpb $0x72, CRXBUF               # 'r' of "run workload\n"
    jne fail
    movq $1, DONE
    lea count(%rip), %rsi
    call puts
    mov %r13, %rax
    call puthex
    mov $10, %al
    call putc
    lea done(%rip), %rsi
    mov $done_len, %ecx
    call ctl_send
1:  sti
    hlt
    jmp wait
take:
    sti
4:  cmpw %r12w, RXQ+0x2002
    je 5f
    mov %r12d, %eax
    and $QSIZE-1, %eax
    mov RXQ+0x2004(,%rax,8), %edx    # used.ring[..].id
    mov %edx, %eax
    shl $11, %eax
    cmp %r13d, RXBUF+HDR+14(%rax)    # in order
    jne fail
    inc %r13d
    movzwl RXQ+0x1002, %eax          # re-post the buffer
    mov %eax, %ecx
    and $QSIZE-1, %ecx
    mov %dx, RXQ+0x1004(,%rcx,2)
    inc %eax
    mov %ax, RXQ+0x1002
    inc %r12d
    jmp 4b
5:  movl $0, 0x50(%rbx)              # QueueNotify(RX): buffers are back
    jmp wait
fail:
    mov $1, %eax
    call poweroff

tick:
    movq $1, SLEPT
    iretq

ready:  .ascii "@sim ready\n"
    .set ready_len, . - ready
done:   .ascii "@sim done workload 0\n"
    .set done_len, . - done
sent:   .asciz "sent "
ring:   .asciz "ring "
count:  .asciz "frames "
    .include "common.inc"
    .include "virtio.inc"
    .include "net.inc"
    .include "agent.inc"

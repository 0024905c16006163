# virtio-net guest: one frame to the peer node and one back, through netsim.
#  1. driver init over virtio-mmio at 0xd0000000 (device id 1): features MAC and
#     VERSION_1, RX queue 0 and TX queue 1 of QSIZE entries, rings in guest memory;
#  2. reads its MAC (02:00:0a:00:00:NN) from config space; the peer is node 3-NN;
#  3. posts one receive buffer, then sends a 60-byte Ethernet frame (ethertype 0x88b5,
#     payload "hello from node N") to the peer;
#  4. halts until the RX used ring moves (interrupt vector 0x31, acknowledged through
#     InterruptACK), prints the frame and powers off with 0 (1 on any error).
    .code64
    .text
    .globl _start
    .set VIRTIO, 0xd0000000
    .set IRQS, 0x300000
    .set NODE, 0x300008              # this node's number NN
    .set RXQ, 0x400000              # desc table; avail at +0x1000, used at +0x2000
    .set TXQ, 0x410000
    .set RXBUF, 0x420000
    .set TXBUF, 0x430000
    .set QSIZE, 8
    .set HDR, 12                    # virtio-net header (VERSION_1)
    .set FRAME, 60
_start:
    movq $0, IRQS
    lea virtio_irq(%rip), %rax
    mov $0x31, %edi              # vector
    call set_gate
    mov $VIRTIO, %ebx
    mov $RXQ, %esi
    call net_init
    # Frame: dst = peer, src = own MAC (config space), ethertype, payload.
    mov 0x100(%rbx), %eax           # mac[0..4]
    movzwl 0x104(%rbx), %edx        # mac[4..6]; %dh = NN
    mov %dh, NODE
    mov %eax, TXBUF+HDR
    mov %eax, TXBUF+HDR+6
    mov %dx, TXBUF+HDR+10
    mov $3, %cl
    sub %dh, %cl
    mov %dl, TXBUF+HDR+4
    mov %cl, TXBUF+HDR+5
    movw $0xb588, TXBUF+HDR+12
    lea hello(%rip), %rsi
    mov $TXBUF+HDR+14, %edi
    mov $hello_len, %ecx
    rep movsb
    mov NODE, %al
    add $0x30, %al
    mov %al, TXBUF+HDR+14+hello_len-1
    # RX: descriptor 0 = RXBUF, device-writable, made available.
    movq $RXBUF, RXQ
    movl $HDR+1514, RXQ+8
    movw $2, RXQ+12
    movw $0, RXQ+0x1004
    movw $1, RXQ+0x1002
    movl $0, 0x50(%rbx)             # QueueNotify(RX)
    # TX: descriptor 0 = header + frame.
    movq $TXBUF, TXQ
    movl $HDR+FRAME, TXQ+8
    movw $0, TXQ+12
    movw $0, TXQ+0x1004
    movw $1, TXQ+0x1002
    sti
    movl $1, 0x50(%rbx)             # QueueNotify(TX): the frame leaves now
    lea sent(%rip), %rsi
    call puts
wait:
    cli
    cmpw $0, RXQ+0x2002             # used.idx
    jne got
    sti
    hlt
    jmp wait
got:
    sti
    lea rxmsg(%rip), %rsi
    call puts
    mov RXQ+0x2008, %eax            # used.ring[0].len
    call puthex
    lea from(%rip), %rsi
    call puts
    movzbl RXBUF+HDR+11, %eax       # source MAC, last byte
    call puthex
    mov $32, %al
    call putc
    mov $RXBUF+HDR+14, %esi
    call puts
    mov $10, %al
    call putc
    mov NODE, %al
    cmp %al, RXBUF+HDR+5            # addressed to us
    jne fail
    cmpl $HDR+FRAME, RXQ+0x2008
    jne fail
    lea ok(%rip), %rsi
    call puts
    xor %eax, %eax
    call poweroff
fail:
    mov $1, %eax
    call poweroff

hello:  .ascii "hello from node ?"
    .set hello_len, . - hello
sent:   .asciz "sent\n"
rxmsg:  .asciz "rx len="
from:   .asciz " from="
ok:     .asciz "net ok\n"
    .include "common.inc"
    .include "virtio.inc"
    .include "net.inc"

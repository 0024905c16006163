# Engine-agent guest: a microVM node that speaks the engine's control-line
# protocol (checker/src/engine/agent.rs) and exchanges one frame with its peer,
# for engine-level tests of the KVM runtime (vmm::kvm::node::KvmNode).
# Devices (see vmm/src/kvm/node.rs): virtio-net at 0xd0000000 (vector 0x35),
# virtio-console (the control line) at 0xd0002000 (vector 0x37).
#  1. driver init of both devices; one receive buffer posted on each;
#  2. reads its MAC (02:00:0a:00:00:NN), sends "hello from node N" to node 3-NN;
#  3. writes "@sim ready\n" on the control line;
#  4. halts until its peer's frame arrived (prints it on the serial console) and a
#     command arrived on the control line ("run workload\n"); then answers
#     "@sim done workload 0\n" and idles (halt, no timer) for good.
# Any protocol error powers off with 1.
    .code64
    .text
    .globl _start
    .set NET, 0xd0000000
    .set VIRTIO, NET                 # for virtio.inc (its handler is unused)
    .set IRQS, 0x300000
    .set NODE, 0x300008
    .set NETSEEN, 0x300010
    .set CMDSEEN, 0x300018
    .set DONE, 0x300020
    .set NRXQ, 0x400000              # desc table; avail at +0x1000, used at +0x2000
    .set NTXQ, 0x410000
    .set NRXBUF, 0x420000
    .set NTXBUF, 0x430000
    .set QSIZE, 8
    .set HDR, 12                     # virtio-net header (VERSION_1)
    .set FRAME, 60
_start:
    movq $0, NETSEEN
    movq $0, CMDSEEN
    movq $0, DONE
    lea net_irq(%rip), %rax
    mov $0x35, %edi
    call set_gate
    call ctl_init
    # Network: virtio-net (net.inc).
    mov $NET, %ebx
    mov $NRXQ, %esi
    call net_init
    mov 0x100(%rbx), %eax
    movzwl 0x104(%rbx), %edx
    mov %dh, NODE
    mov %eax, NTXBUF+HDR
    mov %eax, NTXBUF+HDR+6
    mov %dx, NTXBUF+HDR+10
    mov $3, %cl
    sub %dh, %cl
    mov %dl, NTXBUF+HDR+4
    mov %cl, NTXBUF+HDR+5
    movw $0xb588, NTXBUF+HDR+12
    lea hello(%rip), %rsi
    mov $NTXBUF+HDR+14, %edi
    mov $hello_len, %ecx
    rep movsb
    mov NODE, %al
    add $0x30, %al
    mov %al, NTXBUF+HDR+14+hello_len-1
    movq $NRXBUF, NRXQ
    movl $HDR+1514, NRXQ+8
    movw $2, NRXQ+12
    movw $0, NRXQ+0x1004
    movw $1, NRXQ+0x1002
    movl $0, 0x50(%rbx)
    movq $NTXBUF, NTXQ
    movl $HDR+FRAME, NTXQ+8
    movw $0, NTXQ+12
    movw $0, NTXQ+0x1004
    movw $1, NTXQ+0x1002
    sti
    movl $1, 0x50(%rbx)              # the frame leaves now
    lea ready(%rip), %rsi
    mov $ready_len, %ecx
    call ctl_send
wait:
    cli
    cmpq $0, NETSEEN
    jne 1f
    cmpw $0, NRXQ+0x2002             # net used.idx
    je 1f
    movq $1, NETSEEN
    mov NODE, %al
    cmp %al, NRXBUF+HDR+5            # addressed to us
    jne fail
    lea got(%rip), %rsi
    call puts
    mov $NRXBUF+HDR+14, %esi
    call puts
    mov $10, %al
    call putc
1:  cmpq $0, CMDSEEN
    jne 2f
    call ctl_got_cmd
    je 2f
    movq $1, CMDSEEN
    cmpb $0x72, CRXBUF               # 'r' of "run workload\n"
    jne fail
2:  cmpq $0, DONE
    jne 3f
    cmpq $0, NETSEEN
    je 3f
    cmpq $0, CMDSEEN
    je 3f
    movq $1, DONE
    lea wdone(%rip), %rsi
    call puts
    lea done(%rip), %rsi
    mov $done_len, %ecx
    call ctl_send
3:  sti
    hlt
    jmp wait
fail:
    mov $1, %eax
    call poweroff

net_irq:
    push %rax
    push %rbx
    mov $NET, %ebx
    mov 0x60(%rbx), %eax
    mov %eax, 0x64(%rbx)
    pop %rbx
    pop %rax
    iretq

hello:  .ascii "hello from node ?"
    .set hello_len, . - hello
ready:  .ascii "@sim ready\n"
    .set ready_len, . - ready
done:   .ascii "@sim done workload 0\n"
    .set done_len, . - done
got:    .asciz "got: "
wdone:  .asciz "workload done\n"
    .include "common.inc"
    .include "virtio.inc"
    .include "net.inc"
    .include "agent.inc"

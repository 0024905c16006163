# virtio-mmio guest: probes the transport at 0xd0000000 (magic, version, device id),
# runs the driver init sequence, notifies queue 0 and takes the device's interrupt
# (vector 0x31), acknowledging it through InterruptACK. Powers off with 0 on success.
    .code64
    .text
    .globl _start
    .set IRQS, 0x300000
    .set VIRTIO, 0xd0000000
_start:
    movq $0, IRQS
    lea handler(%rip), %rax
    mov $0x31, %edi              # vector
    call set_gate
    mov $VIRTIO, %ebx
    mov (%rbx), %eax                # MagicValue
    call puthex
    mov $32, %al
    call putc
    mov 4(%rbx), %eax               # Version
    call puthex
    mov $32, %al
    call putc
    mov 8(%rbx), %eax               # DeviceID
    call puthex
    mov $10, %al
    call putc
    movl $0, 0x70(%rbx)             # reset
    movl $3, 0x70(%rbx)             # ACKNOWLEDGE | DRIVER
    movl $1, 0x24(%rbx)             # DriverFeaturesSel = 1
    movl $1, 0x20(%rbx)             # VIRTIO_F_VERSION_1
    movl $0xb, 0x70(%rbx)           # | FEATURES_OK
    mov 0x70(%rbx), %eax
    test $8, %eax
    jz fail
    movl $0, 0x30(%rbx)             # QueueSel = 0
    movl $16, 0x38(%rbx)            # QueueNum
    movl $1, 0x44(%rbx)             # QueueReady
    movl $0xf, 0x70(%rbx)           # | DRIVER_OK
    sti
    movl $0, 0x50(%rbx)             # QueueNotify(0): the device answers with an interrupt
    call vtime                      # one more exit (PVM delivers at exits)
    cmpq $1, IRQS
    jne fail
    lea ok(%rip), %rsi
    call puts
    xor %eax, %eax
    call poweroff
fail:
    mov $1, %eax
    call poweroff

handler:
    push %rax
    push %rbx
    mov $VIRTIO, %ebx
    incq IRQS
    lea irqmsg(%rip), %rsi
    call puts
    mov 0x60(%rbx), %eax            # InterruptStatus
    call puthex
    mov $10, %al
    call putc
    movl %eax, 0x64(%rbx)           # InterruptACK
    pop %rbx
    pop %rax
    iretq

irqmsg: .asciz "irq status="
ok:     .asciz "virtio ok\n"
    .include "common.inc"

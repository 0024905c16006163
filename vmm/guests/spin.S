# Spins without a single exit: only a wall-clock watchdog (or a PMU) can stop it.
    .code64
    .text
    .globl _start
_start:
1:  jmp 1b

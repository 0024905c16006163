/*
 * /sim/clock: simcluster's clock helper, run by the agent and /init in
 * every guest of a cluster with [faults.clock] bump, strobe or drift_ppm.
 *
 *   clock now                          print "REALTIME_NS MONOTONIC_NS"
 *   clock bump DELTA_NS                jump CLOCK_REALTIME by DELTA_NS
 *   clock strobe DELTA_NS PERIOD_NS LENGTH_NS
 *                                      jump it DELTA_NS forward, wait PERIOD_NS,
 *                                      back, wait PERIOD_NS, ... for LENGTH_NS
 *                                      (of CLOCK_MONOTONIC); ends where it
 *                                      would have been without the strobe
 *   clock drift PPM                    make CLOCK_REALTIME and CLOCK_MONOTONIC
 *                                      run PPM parts per million fast (negative:
 *                                      slow), |PPM| <= 100000
 *
 * Jumps are adjtimex(ADJ_SETOFFSET): the kernel adds the delta to the wall
 * clock in one step, to the nanosecond (busybox's date -s takes whole
 * seconds and zeroes the fraction). CLOCK_MONOTONIC never moves backwards:
 * jumps do not touch it. Drift sets the kernel's NTP tick length (ADJ_TICK:
 * 10% either way in steps of 100 ppm at USER_HZ 100) and frequency
 * (ADJ_FREQUENCY: the rest, +-500 ppm at most), which both clocks follow.
 *
 * Static, without libc: raw system calls, so it runs in any image (a
 * container image may have no libc at all) and its build needs only cc.
 * Exit status 0 on success, 1 when a system call fails, 2 on bad usage.
 *
 * Anything but `now` runs only inside a simcluster guest (where /sim/agent
 * is): run by hand on a host, as root, it would move the host's clock.
 */

typedef unsigned long size_t;

#define SYS_write 1
#define SYS_access 21
#define SYS_nanosleep 35
#define SYS_adjtimex 159
#define SYS_clock_gettime 228
#define SYS_clock_nanosleep 230
#define SYS_exit_group 231

#define CLOCK_REALTIME 0
#define CLOCK_MONOTONIC 1

#define ADJ_FREQUENCY 0x0002
#define ADJ_TICK 0x4000
#define ADJ_SETOFFSET 0x0100
#define ADJ_NANO 0x2000

struct timespec {
	long tv_sec;
	long tv_nsec;
};

/* struct __kernel_timex, x86-64 layout. */
struct timex {
	unsigned int modes;
	int pad0;
	long long offset, freq, maxerror, esterror;
	int status;
	int pad1;
	long long constant, precision, tolerance;
	struct {
		long long tv_sec, tv_usec;
	} time;
	long long tick, ppsfreq, jitter;
	int shift;
	int pad2;
	long long stabil, jitcnt, calcnt, errcnt, stbcnt;
	int tai;
	int pad3[11];
};

static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

static long sys4(long n, long a, long b, long c, long d)
{
	long r;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
	return r;
}

/* The compiler may call it to clear a struct. */
void *memset(void *s, int c, size_t n)
{
	unsigned char *p = s;
	while (n--)
		*p++ = (unsigned char)c;
	return s;
}

static void put(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	sys3(SYS_write, 1, (long)s, (long)n);
}

static void put_long(long v)
{
	char buf[24];
	int i = sizeof buf - 1;
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;
	buf[i] = 0;
	do {
		buf[--i] = '0' + u % 10;
		u /= 10;
	} while (u);
	if (v < 0)
		buf[--i] = '-';
	put(buf + i);
}

static __attribute__((noreturn)) void leave(int status)
{
	for (;;)
		sys3(SYS_exit_group, status, 0, 0);
}

static __attribute__((noreturn)) void fail(const char *what, long err)
{
	put("simcluster clock: ");
	put(what);
	put(" failed: errno ");
	put_long(-err);
	put("\n");
	leave(1);
}

static int eq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

/* A decimal integer, optionally signed; 0 on anything else. */
static int parse(const char *s, long *out)
{
	long sign = 1, v = 0;
	if (*s == '-' || *s == '+')
		sign = *s++ == '-' ? -1 : 1;
	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 922337203685477580L)
			return 0;
		v = v * 10 + (*s - '0');
	}
	*out = sign * v;
	return 1;
}

static long now_ns(int clock)
{
	struct timespec t;
	long r = sys3(SYS_clock_gettime, clock, (long)&t, 0);
	if (r < 0)
		fail("clock_gettime", r);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void jump(long delta)
{
	struct timex tx;
	memset(&tx, 0, sizeof tx);
	tx.modes = ADJ_SETOFFSET | ADJ_NANO;
	/* A normalised timespec: the nanoseconds are never negative. */
	tx.time.tv_sec = delta / 1000000000L;
	tx.time.tv_usec = delta % 1000000000L;
	if (tx.time.tv_usec < 0) {
		tx.time.tv_sec -= 1;
		tx.time.tv_usec += 1000000000L;
	}
	long r = sys3(SYS_adjtimex, (long)&tx, 0, 0);
	if (r < 0)
		fail("adjtimex(ADJ_SETOFFSET)", r);
}

static void sleep_ns(long ns)
{
	struct timespec t = { ns / 1000000000L, ns % 1000000000L };
	while (sys4(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, (long)&t, (long)&t) == -4 /* EINTR */)
		;
}

static void strobe(long delta, long period, long length)
{
	long end = now_ns(CLOCK_MONOTONIC) + length;
	while (now_ns(CLOCK_MONOTONIC) < end) {
		jump(delta);
		sleep_ns(period);
		jump(-delta);
		sleep_ns(period);
	}
}

static void drift(long ppm)
{
	struct timex tx;
	memset(&tx, 0, sizeof tx);
	/* 100 ppm per microsecond of a 10000 us tick; the rest as frequency
	 * (scaled ppm: ppm << 16). */
	long ticks = ppm / 100;
	tx.modes = ADJ_TICK | ADJ_FREQUENCY;
	tx.tick = 10000 + ticks;
	tx.freq = (ppm - ticks * 100) * 65536;
	long r = sys3(SYS_adjtimex, (long)&tx, 0, 0);
	if (r < 0)
		fail("adjtimex(ADJ_TICK|ADJ_FREQUENCY)", r);
}

static __attribute__((noreturn)) void usage(void)
{
	put("usage: clock now | bump DELTA_NS | strobe DELTA_NS PERIOD_NS LENGTH_NS | drift PPM\n");
	leave(2);
}

static int run(int argc, char **argv)
{
	long a, b, c;
	if (argc >= 2 && !eq(argv[1], "now") && sys3(SYS_access, (long)"/sim/agent", 0, 0) != 0) {
		put("clock: not inside a simcluster guest (no /sim/agent): refusing to change this machine's clock\n");
		leave(2);
	}
	if (argc == 2 && eq(argv[1], "now")) {
		put_long(now_ns(CLOCK_REALTIME));
		put(" ");
		put_long(now_ns(CLOCK_MONOTONIC));
		put("\n");
	} else if (argc == 3 && eq(argv[1], "bump") && parse(argv[2], &a)) {
		jump(a);
	} else if (argc == 5 && eq(argv[1], "strobe") && parse(argv[2], &a) && parse(argv[3], &b) && parse(argv[4], &c) &&
		   b > 0 && c >= 0) {
		strobe(a, b, c);
	} else if (argc == 3 && eq(argv[1], "drift") && parse(argv[2], &a) && a >= -100000 && a <= 100000) {
		drift(a);
	} else {
		usage();
	}
	return 0;
}

__attribute__((used)) void start_c(long *sp)
{
	leave(run((int)sp[0], (char **)(sp + 1)));
}

__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"	xor %rbp, %rbp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call start_c\n"
	"	hlt\n");

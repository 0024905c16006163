/*
 * Prints what a guest program can read that a runtime could let host state
 * into; see cluster.toml. Exits 1 if the counter leaves its clock bracket
 * or stops moving.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static inline uint64_t rdtscp(uint32_t *aux)
{
	uint32_t lo, hi, c;
	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c));
	*aux = c;
	return (uint64_t)hi << 32 | lo;
}

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Both runtimes answer RDTSC with virtual ns: UML's patch strictly inside
 * the bracket, the KVM guest's never below it and strictly increasing (it
 * may run ahead of a clock that only moves at ticks).
 */
static int counter(const char *who)
{
	int bad = 0;
	for (int i = 0; i < 3; i++) {
		uint32_t aux = ~0u;
		uint64_t a = mono();
		uint64_t t = rdtsc();
		uint64_t p = rdtscp(&aux);
		int ok = a <= t && t < p && aux == 0;
		printf("guest-state %s counter %d: mono %llu rdtsc %llu rdtscp %llu aux %u %s\n", who, i,
		       (unsigned long long)a, (unsigned long long)t, (unsigned long long)p, aux, ok ? "ok" : "BAD");
		bad |= !ok;
	}
	uint64_t t0 = rdtsc();
	unsigned long reads = 0;
	while (rdtsc() - t0 < 100000)
		reads++;
	printf("guest-state %s: %lu reads until the counter moved 100 us\n", who, reads);
	return bad;
}

/*
 * The kernel's clocksource and the smallest step CLOCK_MONOTONIC takes: a
 * tick-driven clock (jiffies) moves in ms steps, a real clocksource in ns.
 * Bounded: a clock that does not move while the program computes (no
 * exits, no tick) prints "none".
 */
static void clock_step(void)
{
	char name[64] = "?";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	if (f && fgets(name, sizeof name, f))
		name[strcspn(name, "\n")] = 0;
	if (f)
		fclose(f);
	uint64_t a = mono(), b = a;
	for (long i = 0; i < 10000000 && b == a; i++)
		b = mono();
	if (b == a)
		printf("guest-state clocksource %s step none\n", name);
	else
		printf("guest-state clocksource %s step %llu ns\n", name, (unsigned long long)(b - a));
}

static void randomness(void)
{
	unsigned char r[16];
	char line[64] = "";
	if (getrandom(r, sizeof r, 0) != sizeof r) {
		printf("guest-state getrandom failed\n");
		return;
	}
	for (unsigned i = 0; i < sizeof r; i++)
		sprintf(line + 2 * i, "%02x", r[i]);
	printf("guest-state getrandom %s\n", line);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f && fgets(line, sizeof line, f))
		printf("guest-state boot_id %s", line);
	if (f)
		fclose(f);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &len) == 0)
		printf("guest-state udp ephemeral port %u\n", ntohs(a.sin_port));
	if (s >= 0)
		close(s);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	int bad = counter("parent");
	pid_t pid = fork();
	if (pid == 0)
		_exit(counter("child"));
	int status = 1;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bad = 1;
	clock_step();
	randomness();
	printf("guest-state result %s\n", bad ? "BAD" : "ok");
	return bad;
}

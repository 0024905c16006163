/*
 * Guest probe for tests/node_faults.rs (pauses and clock faults).
 *
 *   probe server PORT                 UDP: answer every datagram with
 *                                     "<datagram> <CLOCK_REALTIME ns>"
 *   probe heartbeat HOST PORT COUNT strict|retry
 *                                     every 100 ms ping the server and wait
 *                                     500 ms for its answer; strict: declare it
 *                                     dead (exit 1) at the first silence;
 *                                     retry: ping again until it answers
 *   probe wall SECONDS                read CLOCK_REALTIME every 10 ms; exit 1
 *                                     the first time it went backwards
 *   probe mono SECONDS                the same for CLOCK_MONOTONIC (and say how
 *                                     often the wall clock went back meanwhile)
 *   probe ticks SECONDS               print "tick MONO_NS REAL_NS" every second
 *                                     of CLOCK_MONOTONIC
 *   probe skew HOST PORT BOUND_MS     ask the server its wall clock; exit 1 when
 *                                     it differs from ours by more than BOUND_MS
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0)
		;
}

static int udp_to(const char *host, int port, struct sockaddr_in *to, int timeout_ms)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	memset(to, 0, sizeof *to);
	to->sin_family = AF_INET;
	to->sin_port = htons(port);
	if (s < 0 || inet_pton(AF_INET, host, &to->sin_addr) != 1) {
		printf("probe: cannot reach %s (give an address: 10.0.0.2)\n", host);
		exit(2);
	}
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	return s;
}

static int server(int port)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
		perror("bind");
		return 2;
	}
	for (;;) {
		char buf[256], out[320];
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &fl);
		if (n < 0)
			continue;
		buf[n] = 0;
		int k = snprintf(out, sizeof out, "%s %lld", buf, ns(CLOCK_REALTIME));
		sendto(s, out, k, 0, (struct sockaddr *)&from, fl);
	}
}

static int heartbeat(const char *host, int port, int count, int strict)
{
	struct sockaddr_in to;
	int s = udp_to(host, port, &to, 500);
	int answered = 0, silences = 0;
	for (int i = 0; answered < count; i++) {
		char msg[32], buf[256];
		int k = snprintf(msg, sizeof msg, "ping %d", i);
		sendto(s, msg, k, 0, (struct sockaddr *)&to, sizeof to);
		if (recv(s, buf, sizeof buf, 0) < 0) {
			silences++;
			if (strict) {
				printf("probe: no heartbeat within 500 ms after ping %d: the server is dead\n", i);
				return 1;
			}
			if (silences > 100)
				return 3;
			continue;
		}
		answered++;
		sleep_ms(100);
	}
	printf("probe: %d heartbeats answered, %d silences\n", answered, silences);
	return 0;
}

static int watch(clockid_t c, int seconds)
{
	long long end = ns(CLOCK_MONOTONIC) + seconds * 1000000000LL;
	long long prev = ns(c), wall_prev = ns(CLOCK_REALTIME);
	int wall_back = 0;
	while (ns(CLOCK_MONOTONIC) < end) {
		sleep_ms(10);
		long long t = ns(c), w = ns(CLOCK_REALTIME);
		if (t < prev) {
			printf("probe: clock %d went back by %lld ns\n", (int)c, prev - t);
			return 1;
		}
		wall_back += w < wall_prev;
		prev = t;
		wall_prev = w;
	}
	printf("probe: clock %d never went back; the wall clock went back %d times\n", (int)c, wall_back);
	return 0;
}

static int ticks(int seconds)
{
	for (int i = 0; i <= seconds; i++) {
		long long m = ns(CLOCK_MONOTONIC), r = ns(CLOCK_REALTIME);
		printf("tick %lld %lld\n", m, r);
		fflush(stdout);
		if (i < seconds)
			sleep_ms(1000);
	}
	return 0;
}

static int skew(const char *host, int port, long bound_ms)
{
	struct sockaddr_in to;
	int s = udp_to(host, port, &to, 1000);
	for (int tries = 0; tries < 20; tries++) {
		char buf[256];
		sendto(s, "time", 4, 0, (struct sockaddr *)&to, sizeof to);
		ssize_t n = recv(s, buf, sizeof buf - 1, 0);
		if (n < 0)
			continue;
		buf[n] = 0;
		long long theirs = atoll(buf + 5), ours = ns(CLOCK_REALTIME);
		long long diff = theirs > ours ? theirs - ours : ours - theirs;
		printf("probe: clocks differ by %lld ms\n", diff / 1000000);
		return diff > bound_ms * 1000000LL;
	}
	return 3;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc == 6 && !strcmp(argv[1], "heartbeat"))
		return heartbeat(argv[2], atoi(argv[3]), atoi(argv[4]), !strcmp(argv[5], "strict"));
	if (argc == 3 && !strcmp(argv[1], "wall"))
		return watch(CLOCK_REALTIME, atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "mono"))
		return watch(CLOCK_MONOTONIC, atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "ticks"))
		return ticks(atoi(argv[2]));
	if (argc == 5 && !strcmp(argv[1], "skew"))
		return skew(argv[2], atoi(argv[3]), atol(argv[4]));
	fprintf(stderr, "usage: see the source\n");
	return 2;
}

/*
 * Guest probe for tests/connection_faults.rs (TCP connection resets and
 * stalls, [faults.connection]).
 *
 *   conn server PORT              TCP: answer every line on every
 *                                 connection with the same line; say
 *                                 "server: read: <error>" when a connection
 *                                 fails
 *   conn client HOST PORT COUNT NAME
 *                                 one connection: COUNT times send a line and
 *                                 wait for its answer, 50 ms apart; print
 *                                 "client NAME: COUNT answers, max rtt MS ms",
 *                                 or "client NAME: <error>" and exit 1
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ms_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0)
		;
}

static int serve(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16)) {
		perror("server: bind");
		return 1;
	}
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		int c = accept(s, 0, 0);
		if (c < 0)
			continue;
		if (fork() == 0) {
			char buf[256];
			for (;;) {
				ssize_t n = read(c, buf, sizeof buf);
				if (n < 0) {
					printf("server: read: %s\n", strerror(errno));
					fflush(stdout);
					_exit(1);
				}
				if (n == 0)
					_exit(0);
				if (send(c, buf, n, MSG_NOSIGNAL) != n) {
					printf("server: write: %s\n", strerror(errno));
					fflush(stdout);
					_exit(1);
				}
			}
		}
		close(c);
	}
}

static int client(const char *host, int port, int count, const char *name)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, host, &a.sin_addr);
	for (int tries = 0; connect(s, (struct sockaddr *)&a, sizeof a) != 0; tries++) {
		if (tries == 50) {
			printf("client %s: connect: %s\n", name, strerror(errno));
			return 1;
		}
		close(s);
		s = socket(AF_INET, SOCK_STREAM, 0);
		sleep_ms(100);
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	long long max_rtt = 0;
	for (int i = 0; i < count; i++) {
		char line[64], back[64];
		int len = snprintf(line, sizeof line, "%s %d\n", name, i), got = 0;
		long long t0 = ms_now();
		if (send(s, line, len, MSG_NOSIGNAL) != len) {
			printf("client %s: write: %s\n", name, strerror(errno));
			return 1;
		}
		while (got < len) {
			ssize_t n = read(s, back + got, sizeof back - got);
			if (n <= 0) {
				printf("client %s: read: %s\n", name, n == 0 ? "closed" : strerror(errno));
				return 1;
			}
			got += n;
		}
		if (ms_now() - t0 > max_rtt)
			max_rtt = ms_now() - t0;
		sleep_ms(50);
	}
	printf("client %s: %d answers, max rtt %lld ms\n", name, count, max_rtt);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, 0, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
	fprintf(stderr, "usage: conn server PORT | conn client HOST PORT COUNT NAME\n");
	return 2;
}

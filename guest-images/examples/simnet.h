/* simnet.h: the UDP plumbing every example program shares.
 *
 * Node N is 10.0.0.N (its NODE_ID), all nodes use port PORT, which the
 * including program defines before including this. With SIM_LOOPBACK=1
 * (one machine, no simulated network, for a quick test outside
 * simcluster) node N is 127.0.0.1 port PORT+N instead.
 *
 * Waiting is always poll/sleep with a timeout, never spinning: under
 * simcluster virtual time advances only while a guest waits.
 */
#ifndef SIMNET_H
#define SIMNET_H

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PORT
#error "define PORT before including simnet.h"
#endif

/* This node's number (NODE_ID); set by main with node_id(). */
static int me;

static inline int node_id(void) {
    return getenv("NODE_ID") ? atoi(getenv("NODE_ID")) : 1;
}

static inline struct sockaddr_in node_addr(int n) {
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (getenv("SIM_LOOPBACK")) {
        a.sin_addr.s_addr = htonl(0x7f000001);
        a.sin_port = htons(PORT + n);
    } else {
        a.sin_addr.s_addr = htonl(0x0a000000 | n); /* 10.0.0.n */
        a.sin_port = htons(PORT);
    }
    return a;
}

/* A UDP socket bound to this node's port (unbound, any port, for a client). */
static inline int udp_socket(int bind_port) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) { perror("socket"); exit(2); }
    if (bind_port) {
        struct sockaddr_in a = node_addr(me);
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); exit(2); }
    }
    return s;
}

static inline void send_to(int s, int n, const char *msg) {
    struct sockaddr_in a = node_addr(n);
    sendto(s, msg, strlen(msg), 0, (struct sockaddr *)&a, sizeof a); /* errors: like a lost frame */
}

/* Waits up to ms milliseconds (virtual time) for a datagram and NUL-terminates
 * it; returns its length, 0 on timeout. */
static inline int recv_timeout(int s, char *buf, int len, int ms) {
    struct pollfd p = {.fd = s, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) return 0;
    int r = recv(s, buf, len - 1, 0);
    if (r <= 0) return 0;
    buf[r] = 0;
    return r;
}

/* A peer's datagram and where it came from, to answer it (reply_to). Waits
 * as long as it takes; NUL-terminates; returns its length (> 0). */
struct peer {
    struct sockaddr_in addr;
    socklen_t len;
};

static inline int recv_from_peer(int s, char *buf, int len, struct peer *from) {
    for (;;) {
        from->len = sizeof from->addr;
        ssize_t r = recvfrom(s, buf, len - 1, 0, (struct sockaddr *)&from->addr, &from->len);
        if (r > 0) {
            buf[r] = 0;
            return (int)r;
        }
    }
}

static inline void reply_to(int s, const struct peer *to, const char *msg) {
    sendto(s, msg, strlen(msg), 0, (const struct sockaddr *)&to->addr, to->len);
}

/* This node's monotonic time in ms (virtual under simcluster). */
static inline long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

#endif

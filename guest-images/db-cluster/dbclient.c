/*
 * dbclient: the db-cluster workload's client, and two small guest helpers.
 *
 *   dbclient now
 *       Prints CLOCK_MONOTONIC of the guest (virtual time) in ns.
 *
 *   dbclient wait [--endpoints H:P,...] [--timeout-ms N]
 *       Waits until every endpoint answers a linearizable read (a leader and
 *       a quorum exist), at most N ms (60000). Exit 1 if one never does.
 *
 *   dbclient run [options]
 *       Forks --clients processes. Each issues --ops operations (read, write,
 *       compare-and-set) on --keys keys against etcd's HTTP/JSON gateway
 *       (POST /v3/kv/range, /v3/kv/put, /v3/kv/txn), each process talking to
 *       one endpoint (client i -> endpoint i mod n). Every operation is
 *       recorded as an invoke line and a completion line, JSON lines in the
 *       format of checker/src/history.rs:
 *         {"process":P,"type":"invoke","time":NS,"f":"write","key":"k1","value":3}
 *       time = guest CLOCK_MONOTONIC ns (the workload node's clock only).
 *
 *       Outcomes (safe mode, the default):
 *         read   ok: the value read (null: no such key); error/timeout: fail
 *                (a read has no effect, so this is always sound)
 *         write  ok; error or timeout: info (it may have taken effect)
 *         cas    ok (succeeded); fail (etcd answered succeeded=false: it
 *                definitely did not take effect); error or timeout: info
 *       After an info the process continues under a fresh process id
 *       (P + clients), Jepsen style.
 *       --unsafe: a timeout or error of a write or cas is recorded as fail.
 *       That is wrong (the request may have been applied) and is what the
 *       db-cluster-unsafe variant exists to catch.
 *
 *       Options: --endpoints 10.0.0.1:2379,10.0.0.2:2379,...
 *                --clients N (5)  --ops N per client (40)  --keys N (3)
 *                --timeout-ms N per op (2000)  --seed N (1)
 *                --out FILE (history, JSON lines; default /tmp/history.jsonl)
 *                --think-ms N max pause between a client's ops (50)
 *       Exit status 0 when the history was written (whatever the outcomes),
 *       1 on a usage or local error. The history is also copied to stdout
 *       between "@history begin" and "@history end" lines.
 *
 * Static build: gcc -static -O2 -Wall -o dbclient dbclient.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ENDPOINTS 16
#define MAX_CLIENTS 64

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* splitmix64: the only randomness, seeded from --seed and the client. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- base64 ------------------------------------------------------------ */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64enc(const char *in, char *out) {
    size_t n = strlen(in), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint8_t)in[i] << 16;
        if (i + 1 < n) v |= (uint8_t)in[i + 1] << 8;
        if (i + 2 < n) v |= (uint8_t)in[i + 2];
        out[o++] = B64[(v >> 18) & 63];
        out[o++] = B64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? B64[v & 63] : '=';
    }
    out[o] = 0;
}

/* Decodes up to `cap-1` bytes; stops at '"' or end. Returns -1 on junk. */
static int b64dec(const char *in, char *out, size_t cap) {
    uint32_t v = 0;
    int bits = 0;
    size_t o = 0;
    for (; *in && *in != '"'; in++) {
        const char *p = strchr(B64, *in);
        if (*in == '=') break;
        if (!p) return -1;
        v = (v << 6) | (uint32_t)(p - B64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o + 1 >= cap) return -1;
            out[o++] = (char)((v >> bits) & 0xff);
        }
    }
    out[o] = 0;
    return (int)o;
}

/* ---- HTTP -------------------------------------------------------------- */

struct endpoint {
    char host[64];
    int port;
};

enum result { RES_OK, RES_TIMEOUT, RES_ERROR };

/* Time left before the deadline in ms (at least 0). */
static int left_ms(uint64_t deadline) {
    uint64_t t = now_ns();
    return t >= deadline ? 0 : (int)((deadline - t + 999999) / 1000000);
}

/* POSTs `body` to `path`; on RES_OK the response body is in resp (NUL-ended)
 * and *status holds the HTTP status. A fresh connection per request
 * (Connection: close), so a timed-out request never leaves a half-read
 * response on a reused connection. */
static enum result http_post(const struct endpoint *ep, const char *path, const char *body, int timeout_ms,
                             char *resp, size_t cap, int *status) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    enum result r = RES_ERROR;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return RES_ERROR;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ep->port)};
    if (inet_pton(AF_INET, ep->host, &sa.sin_addr) != 1) goto out;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) goto out;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int pr = poll(&pfd, 1, left_ms(deadline));
    if (pr == 0) {
        r = RES_TIMEOUT;
        goto out;
    }
    int err = 0;
    socklen_t el = sizeof err;
    if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) goto out;

    char req[2048];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     path, ep->host, ep->port, strlen(body), body);
    for (int sent = 0; sent < n;) {
        ssize_t w = send(fd, req + sent, (size_t)(n - sent), MSG_NOSIGNAL);
        if (w > 0) {
            sent += (int)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN) goto out;
        pfd.events = POLLOUT;
        if (poll(&pfd, 1, left_ms(deadline)) == 0) {
            r = RES_TIMEOUT;
            goto out;
        }
    }
    size_t got = 0;
    for (;;) {
        if (got + 1 >= cap) goto out;
        ssize_t rd = recv(fd, resp + got, cap - 1 - got, 0);
        if (rd > 0) {
            got += (size_t)rd;
            continue;
        }
        if (rd == 0) break;
        if (errno != EAGAIN) goto out;
        pfd.events = POLLIN;
        int t = left_ms(deadline);
        if (t == 0 || poll(&pfd, 1, t) == 0) {
            r = RES_TIMEOUT;
            goto out;
        }
    }
    resp[got] = 0;
    if (sscanf(resp, "HTTP/1.%*d %d", status) != 1) goto out;
    char *b = strstr(resp, "\r\n\r\n");
    if (!b) goto out;
    memmove(resp, b + 4, strlen(b + 4) + 1);
    r = RES_OK;
out:
    close(fd);
    return r;
}

/* ---- history ----------------------------------------------------------- */

static FILE *hist;

static void emit(uint64_t process, const char *type, uint64_t t, const char *f, const char *key, const char *rest) {
    fprintf(hist, "{\"process\":%llu,\"type\":\"%s\",\"time\":%llu,\"f\":\"%s\",\"key\":\"%s\",%s}\n",
            (unsigned long long)process, type, (unsigned long long)t, f, key, rest);
    fflush(hist);
}

/* ---- one client process ------------------------------------------------ */

struct opts {
    struct endpoint ep[MAX_ENDPOINTS];
    int nep, clients, ops, keys, timeout_ms, think_ms, unsafe_mode;
    uint64_t seed;
    const char *out;
};

/* Values are small integers (0..4) as in Jepsen's etcd test, so that cas
 * succeeds often enough to matter. */
static void client(const struct opts *o, int c) {
    uint64_t rng = o->seed * 1000003ull + (uint64_t)c;
    uint64_t process = (uint64_t)c;
    const struct endpoint *ep = &o->ep[c % o->nep];
    char resp[16384], body[1024], key[32], kb[64], vb[64], fb[64], rest[128];
    for (int i = 0; i < o->ops; i++) {
        if (o->think_ms > 0) sleep_ms((long)(rng_next(&rng) % (uint64_t)o->think_ms));
        snprintf(key, sizeof key, "k%d", (int)(rng_next(&rng) % (uint64_t)o->keys));
        b64enc(key, kb);
        int kind = (int)(rng_next(&rng) % 3); /* 0 read, 1 write, 2 cas */
        int v = (int)(rng_next(&rng) % 5), from = (int)(rng_next(&rng) % 5);
        int status = 0;
        enum result r;
        if (kind == 0) {
            emit(process, "invoke", now_ns(), "read", key, "\"value\":null");
            snprintf(body, sizeof body, "{\"key\":\"%s\"}", kb);
            r = http_post(ep, "/v3/kv/range", body, o->timeout_ms, resp, sizeof resp, &status);
            uint64_t t = now_ns();
            if (r == RES_OK && status == 200 && strstr(resp, "\"header\"")) {
                char *val = strstr(resp, "\"value\":\"");
                char dec[64];
                if (!val) {
                    snprintf(rest, sizeof rest, "\"value\":null");
                } else if (b64dec(val + 9, dec, sizeof dec) > 0) {
                    snprintf(rest, sizeof rest, "\"value\":%s", dec); /* an integer we wrote */
                } else {
                    snprintf(rest, sizeof rest, "\"value\":null,\"error\":\"bad value\"");
                    emit(process, "fail", t, "read", key, rest);
                    continue;
                }
                emit(process, "ok", t, "read", key, rest);
            } else {
                /* A read changes nothing: fail is always sound. */
                snprintf(rest, sizeof rest, "\"value\":null,\"error\":\"%s\"", r == RES_TIMEOUT ? "timeout" : "error");
                emit(process, "fail", t, "read", key, rest);
            }
        } else {
            const char *f = kind == 1 ? "write" : "cas";
            char vs[16], fs[16];
            snprintf(vs, sizeof vs, "%d", v);
            snprintf(fs, sizeof fs, "%d", from);
            b64enc(vs, vb);
            b64enc(fs, fb);
            if (kind == 1) {
                snprintf(rest, sizeof rest, "\"value\":%d", v);
                snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", kb, vb);
            } else {
                snprintf(rest, sizeof rest, "\"from\":%d,\"to\":%d", from, v);
                snprintf(body, sizeof body,
                         "{\"compare\":[{\"key\":\"%s\",\"target\":\"VALUE\",\"result\":\"EQUAL\",\"value\":\"%s\"}],"
                         "\"success\":[{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}}]}",
                         kb, fb, kb, vb);
            }
            emit(process, "invoke", now_ns(), f, key, rest);
            r = http_post(ep, kind == 1 ? "/v3/kv/put" : "/v3/kv/txn", body, o->timeout_ms, resp, sizeof resp,
                          &status);
            uint64_t t = now_ns();
            if (r == RES_OK && status == 200 && strstr(resp, "\"header\"")) {
                /* proto3 JSON omits false: no "succeeded":true means the
                 * compare failed and nothing was written. */
                int ok = kind == 1 || strstr(resp, "\"succeeded\":true") != NULL;
                emit(process, ok ? "ok" : "fail", t, f, key, rest);
            } else {
                const char *why = r == RES_TIMEOUT ? "timeout" : r == RES_ERROR ? "error" : "http";
                char r2[192];
                snprintf(r2, sizeof r2, "%s,\"error\":\"%s\"", rest, why);
                if (o->unsafe_mode) {
                    emit(process, "fail", t, f, key, r2); /* WRONG on purpose */
                } else {
                    emit(process, "info", t, f, key, r2);
                    process += (uint64_t)o->clients; /* fresh id after info */
                }
            }
        }
    }
}

static int parse_endpoints(struct opts *o, const char *s) {
    o->nep = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->nep == MAX_ENDPOINTS) return -1;
        struct endpoint *e = &o->ep[o->nep];
        char *colon = strrchr(tok, ':');
        e->port = colon ? atoi(colon + 1) : 2379;
        if (colon) *colon = 0;
        snprintf(e->host, sizeof e->host, "%s", tok);
        o->nep++;
    }
    return o->nep > 0 ? 0 : -1;
}

/* dbclient wait [--endpoints ...] [--timeout-ms N]: until every endpoint
 * answers a linearizable read (which needs a leader and a quorum), polling
 * every 200 ms. Exit 0 when all did, 1 at the deadline (default 60 s). */
static int wait_ready(int argc, char **argv) {
    struct opts o;
    int limit_ms = 60000;
    parse_endpoints(&o, "10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379");
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--endpoints")) parse_endpoints(&o, argv[i + 1]);
        else if (!strcmp(argv[i], "--timeout-ms")) limit_ms = atoi(argv[i + 1]);
    }
    uint64_t deadline = now_ns() + (uint64_t)limit_ms * 1000000ull;
    char resp[4096];
    for (int e = 0; e < o.nep; e++) {
        for (;;) {
            int status = 0;
            if (http_post(&o.ep[e], "/v3/kv/range", "{\"key\":\"cmVhZHk=\"}", 1000, resp, sizeof resp, &status) ==
                    RES_OK &&
                status == 200)
                break;
            if (now_ns() >= deadline) {
                fprintf(stderr, "dbclient wait: %s:%d not ready\n", o.ep[e].host, o.ep[e].port);
                return 1;
            }
            sleep_ms(200);
        }
    }
    printf("dbclient wait: %d endpoints ready at %.3f s\n", o.nep, (double)now_ns() / 1e9);
    return 0;
}

static int run(int argc, char **argv) {
    struct opts o = {.clients = 5, .ops = 40, .keys = 3, .timeout_ms = 2000, .think_ms = 50, .seed = 1,
                     .out = "/tmp/history.jsonl"};
    parse_endpoints(&o, "10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379");
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--unsafe")) {
            o.unsafe_mode = 1;
            continue;
        }
        if (!v) goto usage;
        i++;
        if (!strcmp(a, "--endpoints")) {
            if (parse_endpoints(&o, v)) goto usage;
        } else if (!strcmp(a, "--clients")) o.clients = atoi(v);
        else if (!strcmp(a, "--ops")) o.ops = atoi(v);
        else if (!strcmp(a, "--keys")) o.keys = atoi(v);
        else if (!strcmp(a, "--timeout-ms")) o.timeout_ms = atoi(v);
        else if (!strcmp(a, "--think-ms")) o.think_ms = atoi(v);
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--out")) o.out = v;
        else goto usage;
    }
    if (o.clients < 1 || o.clients > MAX_CLIENTS || o.keys < 1 || o.ops < 0 || o.timeout_ms < 1) goto usage;

    pid_t pids[MAX_CLIENTS];
    for (int c = 0; c < o.clients; c++) {
        pid_t p = fork();
        if (p < 0) {
            perror("dbclient: fork");
            return 1;
        }
        if (p == 0) {
            char path[256];
            snprintf(path, sizeof path, "%s.%d", o.out, c);
            hist = fopen(path, "w");
            if (!hist) _exit(1);
            client(&o, c);
            fclose(hist);
            _exit(0);
        }
        pids[c] = p;
    }
    int bad = 0;
    for (int c = 0; c < o.clients; c++) {
        int st;
        if (waitpid(pids[c], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
    }
    /* Concatenate: the checker orders by time, not by line. */
    FILE *out = fopen(o.out, "w");
    if (!out) {
        perror(o.out);
        return 1;
    }
    printf("@history begin\n");
    for (int c = 0; c < o.clients; c++) {
        char path[256], line[512];
        snprintf(path, sizeof path, "%s.%d", o.out, c);
        FILE *in = fopen(path, "r");
        if (!in) {
            bad = 1;
            continue;
        }
        while (fgets(line, sizeof line, in)) {
            fputs(line, out);
            fputs(line, stdout);
        }
        fclose(in);
        unlink(path);
    }
    printf("@history end\n");
    fclose(out);
    fflush(stdout);
    if (bad) fprintf(stderr, "dbclient: a client process failed\n");
    return bad;
usage:
    fprintf(stderr, "usage: dbclient run [--endpoints H:P,...] [--clients N] [--ops N] [--keys N] "
                    "[--timeout-ms N] [--think-ms N] [--seed N] [--out FILE] [--unsafe]\n");
    return 1;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "now")) {
        printf("%llu\n", (unsigned long long)now_ns());
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "run")) return run(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "wait")) return wait_ready(argc, argv);
    fprintf(stderr, "usage: dbclient now | wait [--endpoints ..] [--timeout-ms N] | run [options]\n");
    return 1;
}

/* leader: naive leader election by "lowest id I can hear".
 *
 * Every node sends a heartbeat to every peer every 200 ms. A node considers
 * itself the leader when it has heard no heartbeat from any node with a lower
 * id for 1 s (and it has been up for 3 s, so that booting peers are heard).
 *
 * KNOWN BUG (on purpose): there is no quorum. A node cut off from the lower
 * ids by a partition elects itself while the real leader, on the other side,
 * keeps leading: two leaders at once (split brain). Without partitions n1 is
 * the only leader, forever.
 *
 *   leader server   start command on every node: UDP port 7002
 *   leader check    invariant: asks every node for its leadership intervals
 *                   (virtual wall-clock ms) and fails if two of them overlap
 *
 * Node N is 10.0.0.N (NODE_ID, PEERS). For testing on one machine without the
 * simulated network, SIM_LOOPBACK=1 puts node N on 127.0.0.1 port 7002+N.
 */

#define PORT 7002
#include "../simnet.h"
#define MAXN 16
#define MAXIV 64
#define HEARTBEAT_MS 200
#define TIMEOUT_MS 1000
#define STARTUP_MS 3000

static int nodes;

/* Virtual wall-clock time in ms: one clock for the whole cluster. */
static long long cluster_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

/* Seconds since midnight: the guests' day starts at boot. */
static double tsec(long long ms) { return (ms % 86400000LL) / 1000.0; }

/* ---- the server ---------------------------------------------------------- */

static _Noreturn void server(void) {
    long long heard[MAXN + 1] = {0}, start = cluster_ms(), last_hb = 0;
    long long iv[MAXIV][2]; /* my leadership intervals [from, to); to = -1: ongoing */
    int niv = 0, leader = 0, s = udp_socket(1);
    char buf[2048];
    printf("n%d: up, %d nodes, heartbeats every %d ms\n", me, nodes, HEARTBEAT_MS);
    for (;;) {
        long long now = cluster_ms();
        if (now - last_hb >= HEARTBEAT_MS) {
            snprintf(buf, sizeof buf, "hb %d", me);
            for (int n = 1; n <= nodes; n++)
                if (n != me) send_to(s, n, buf);
            last_hb = now;
        }
        /* BUG: "nobody lower is alive" is decided from what this node alone
         * can hear. A partition makes the lower ids silent, not dead, and no
         * majority is asked before taking over. */
        int want = now - start >= STARTUP_MS;
        for (int n = 1; n < me; n++)
            if (now - heard[n] < TIMEOUT_MS) want = 0;
        if (want && !leader && niv < MAXIV) {
            iv[niv][0] = now, iv[niv++][1] = -1;
            leader = 1;
            printf("n%d: I am the leader now (t=%.3f s; no lower id heard for %d ms)\n", me, tsec(now), TIMEOUT_MS);
        } else if (!want && leader) {
            iv[niv - 1][1] = now;
            leader = 0;
            printf("n%d: a lower id is alive again: stepping down (t=%.3f s)\n", me, tsec(now));
        }

        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        int r = recvfrom(s, buf, 64, 0, (struct sockaddr *)&from, &fl), n;
        if (r <= 0) continue;
        buf[r] = 0;
        if (sscanf(buf, "hb %d", &n) == 1 && n >= 1 && n <= MAXN) {
            heard[n] = cluster_ms();
        } else if (!strncmp(buf, "intervals?", 10)) {
            /* Answer "iv ME FROM TO FROM TO ..." with ongoing ones ending now. */
            int o = snprintf(buf, sizeof buf, "iv %d", me);
            for (int i = 0; i < niv && o < (int)sizeof buf - 48; i++)
                o += snprintf(buf + o, sizeof buf - o, " %lld %lld", iv[i][0], iv[i][1] < 0 ? cluster_ms() : iv[i][1]);
            sendto(s, buf, o, 0, (struct sockaddr *)&from, fl);
        }
    }
}

/* ---- the check ----------------------------------------------------------- */

static int check(void) {
    long long iv[MAXN + 1][MAXIV][2];
    int niv[MAXN + 1] = {0}, answered[MAXN + 1] = {0}, s = udp_socket(0), bad = 0, heard = 0;
    char buf[2048];
    for (int n = 1; n <= nodes; n++) {
        for (int try = 0; try < 10 && !answered[n]; try++) {
            send_to(s, n, "intervals?");
            struct pollfd p = {.fd = s, .events = POLLIN};
            while (!answered[n] && poll(&p, 1, 500) > 0) {
                int r = recv(s, buf, sizeof buf - 1, 0), who, off;
                if (r <= 0) continue;
                buf[r] = 0;
                if (sscanf(buf, "iv %d%n", &who, &off) != 1 || who != n) continue;
                long long a, b;
                int used;
                while (niv[n] < MAXIV && sscanf(buf + off, " %lld %lld%n", &a, &b, &used) == 2)
                    iv[n][niv[n]][0] = a, iv[n][niv[n]++][1] = b, off += used;
                answered[n] = 1;
                heard++;
            }
        }
        if (!answered[n]) printf("check: n%d did not answer; its leadership is unknown\n", n);
        for (int i = 0; i < niv[n]; i++)
            printf("check: n%d was leader from t=%.3f s to t=%.3f s\n", n, tsec(iv[n][i][0]), tsec(iv[n][i][1]));
    }
    for (int a = 1; a <= nodes; a++)
        for (int b = a + 1; b <= nodes; b++)
            for (int i = 0; i < niv[a]; i++)
                for (int j = 0; j < niv[b]; j++) {
                    long long lo = iv[a][i][0] > iv[b][j][0] ? iv[a][i][0] : iv[b][j][0];
                    long long hi = iv[a][i][1] < iv[b][j][1] ? iv[a][i][1] : iv[b][j][1];
                    if (lo < hi) {
                        printf("PROPERTY VIOLATED: two leaders at once: n%d and n%d were both leader "
                               "from t=%.3f s to t=%.3f s (split brain)\n", a, b, tsec(lo), tsec(hi));
                        bad++;
                    }
                }
    if (heard < 2) {
        printf("CHECK FAILED: only %d node(s) answered; cannot compare leaders\n", heard);
        return 1;
    }
    if (!bad) printf("PROPERTY HOLDS: never more than one leader at a time (%d of %d nodes answered)\n", heard, nodes);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    me = node_id();
    nodes = 1;
    for (const char *p = getenv("PEERS"); p && *p; p++) nodes += *p == ',';
    if (nodes > MAXN) nodes = MAXN;
    if (argc == 2 && !strcmp(argv[1], "server")) server();
    if (argc == 2 && !strcmp(argv[1], "check")) return check();
    fprintf(stderr, "usage: leader server|check\n");
    return 2;
}

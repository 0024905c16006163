/* pbkv: primary-backup key-value store with asynchronous replication.
 *
 * n1 starts as primary, n2 as backup, n3 is the client. The primary sends the
 * backup a heartbeat every 200 ms and, every 500 ms, the writes it has
 * acknowledged since the last batch. A backup that hears nothing for 1 s
 * takes over as primary.
 *
 * KNOWN BUG (on purpose): the primary acknowledges a write before the backup
 * has it. If the primary crashes between the "ok" and the next batch, the
 * backup takes over without that write: an acknowledged write is lost.
 * Without crashes every write reaches the backup within 500 ms.
 *
 *   pbkv server                 start command on every node (n3 idles)
 *   pbkv client [CRASH_AFTER]   workload on n3: 30 writes; with CRASH_AFTER,
 *                               tells n1 to simulate a crash after that many
 *                               acks (a stand-in until the engine crashes nodes)
 *   pbkv check                  invariant on n3: every acknowledged write is on
 *                               every node that now acts as primary
 *
 * Node N is 10.0.0.N. SIM_LOOPBACK=1 (one machine, no simulated network) puts
 * node N on 127.0.0.1 port 7003+N.
 */

#define PORT 7003
#include "../simnet.h"
#define NKEYS 30
#define ACKED "/tmp/acked"

/* ---- the server ---------------------------------------------------------- */

static _Noreturn void server(void) {
    int kv[NKEYS + 1] = {0}, pending[NKEYS + 1] = {0}; /* 0: absent / not pending */
    int primary = me == 1, s = udp_socket(1);
    long long start = now_ms(), heard = start, last_hb = 0, last_repl = start;
    char buf[1024];
    printf("n%d: up as %s\n", me, primary ? "primary" : me == 2 ? "backup" : "idle (client node)");
    for (;;) {
        long long now = now_ms();
        if (primary && me == 1 && now - last_hb >= 200) {
            send_to(s, 2, "hb");
            last_hb = now;
        }
        if (primary && now - last_repl >= 500) { /* ship the batch to the backup */
            int o = snprintf(buf, sizeof buf, "repl"), any = 0;
            for (int k = 1; k <= NKEYS; k++)
                if (pending[k]) o += snprintf(buf + o, sizeof buf - o, " %d %d", k, kv[k]), pending[k] = 0, any = 1;
            if (any && me == 1) send_to(s, 2, buf); /* fire and forget */
            last_repl = now;
        }
        if (me == 2 && !primary && now - start > 3000 && now - heard > 1000) {
            primary = 1;
            printf("n2: no heartbeat from n1 for 1 s: taking over as primary\n");
        }

        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        int r = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &fl), k, v, off, used;
        if (r <= 0) continue;
        buf[r] = 0;
        char out[1024];
        out[0] = 0;
        if (!strcmp(buf, "hb")) {
            heard = now_ms();
        } else if (!strncmp(buf, "repl", 4)) {
            off = 4;
            while (sscanf(buf + off, " %d %d%n", &k, &v, &used) == 2) {
                if (k >= 1 && k <= NKEYS) kv[k] = v;
                off += used;
            }
        } else if (sscanf(buf, "put %d %d", &k, &v) == 2 && k >= 1 && k <= NKEYS) {
            if (!primary) {
                snprintf(out, sizeof out, "notprimary %d", k);
            } else {
                kv[k] = v;
                pending[k] = 1;
                /* BUG: "ok" goes out now; the backup gets the write only with
                 * the next batch, up to 500 ms later, if this node is alive. */
                snprintf(out, sizeof out, "ok %d", k);
            }
        } else if (!strcmp(buf, "dump")) {
            int o = snprintf(out, sizeof out, "dump %d %s", me, primary ? "primary" : "backup");
            for (k = 1; k <= NKEYS; k++)
                if (kv[k]) o += snprintf(out + o, sizeof out - o, " %d %d", k, kv[k]);
        } else if (!strcmp(buf, "crash")) {
            /* Test hook: behave like a node that lost power. Memory is gone,
             * nothing is sent or answered again. (Not an exit: a start
             * command that exits non-zero is itself a failure.) */
            printf("n%d: simulated crash: stopping dead, unreplicated writes lost\n", me);
            for (;;) pause();
        }
        if (out[0]) sendto(s, out, strlen(out), 0, (struct sockaddr *)&from, fl);
    }
}

/* ---- client and check ---------------------------------------------------- */

/* Sends req to node n and waits up to 300 ms for a reply whose first words
 * are prefix (so "ok 1" does not match "ok 10"); returns 1 and the reply in
 * buf, or 0. */
static int ask(int s, int n, const char *req, const char *prefix, char *buf, int len) {
    send_to(s, n, req);
    struct pollfd p = {.fd = s, .events = POLLIN};
    while (poll(&p, 1, 300) > 0) {
        int r = recv(s, buf, len - 1, 0);
        if (r <= 0) continue;
        buf[r] = 0;
        size_t l = strlen(prefix);
        if (!strncmp(buf, prefix, l) && (buf[l] == 0 || buf[l] == ' ')) return 1;
    }
    return 0;
}

static int check(void) {
    int acked[NKEYS + 1] = {0}, nacked = 0, k, v, s = udp_socket(0), bad = 0, primaries = 0;
    FILE *f = fopen(ACKED, "r");
    while (f && fscanf(f, "%d %d", &k, &v) == 2)
        if (k >= 1 && k <= NKEYS) acked[k] = v, nacked++;
    if (f) fclose(f);
    char buf[1024], role[16];
    for (int n = 1; n <= 2; n++) {
        int got = 0, who, off, used, have[NKEYS + 1] = {0};
        for (int try = 0; try < 10 && !got; try++) got = ask(s, n, "dump", "dump", buf, sizeof buf);
        if (!got) { printf("check: n%d does not answer (crashed?)\n", n); continue; }
        if (sscanf(buf, "dump %d %15s%n", &who, role, &off) != 2) continue;
        while (sscanf(buf + off, " %d %d%n", &k, &v, &used) == 2) {
            if (k >= 1 && k <= NKEYS) have[k] = v;
            off += used;
        }
        printf("check: n%d answers as %s\n", n, role);
        if (strcmp(role, "primary")) continue;
        primaries++;
        int missing = 0;
        for (k = 1; k <= NKEYS; k++)
            if (acked[k] && have[k] != acked[k]) {
                if (!missing++) printf("PROPERTY VIOLATED: primary n%d lacks acknowledged writes:", n);
                printf(" %d", k);
            }
        if (missing) printf(" (%d of %d acknowledged writes lost)\n", missing, nacked), bad++;
    }
    if (!primaries) { printf("CHECK FAILED: no node answers as primary\n"); return 1; }
    if (!bad) printf("PROPERTY HOLDS: all %d acknowledged writes are on the primary\n", nacked);
    return bad ? 1 : 0;
}

static int client(int crash_after) {
    int s = udp_socket(0), target = 1, acks = 0;
    char req[64], want[64], buf[1024];
    FILE *f = fopen(ACKED, "w");
    setvbuf(f, NULL, _IOLBF, 0);
    for (int k = 1; k <= NKEYS; k++) {
        snprintf(req, sizeof req, "put %d %d", k, 100 + k);
        snprintf(want, sizeof want, "ok %d", k);
        int ok = 0;
        for (int try = 0; try < 40 && !ok; try++) {
            if (ask(s, target, req, want, buf, sizeof buf)) ok = 1;
            else if (try % 3 == 2) target = 3 - target; /* 1 <-> 2: try the other one */
            else usleep(100 * 1000);
        }
        if (!ok) { printf("n%d: put %d never acknowledged; giving up on it\n", me, k); continue; }
        fprintf(f, "%d %d\n", k, 100 + k); /* acknowledged: must never be lost */
        printf("n%d: put %d acknowledged by n%d\n", me, k, target);
        if (++acks == crash_after) {
            printf("n%d: telling n1 to crash (simulated)\n", me);
            send_to(s, 1, "crash");
        }
        usleep(250 * 1000);
    }
    fclose(f);
    sleep(2); /* let the last batch reach the backup */
    check();  /* print the verdict; the [[invariant]] is what fails the run */
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    me = node_id();
    if (argc == 2 && !strcmp(argv[1], "server")) server();
    if (argc >= 2 && !strcmp(argv[1], "client")) return client(argc > 2 ? atoi(argv[2]) : 0);
    if (argc == 2 && !strcmp(argv[1], "check")) return check();
    fprintf(stderr, "usage: pbkv server|client [CRASH_AFTER]|check\n");
    return 2;
}

/* regkv: a key-value replica that applies UDP updates in arrival order.
 *
 * KNOWN BUG (on purpose): updates carry no sequence number, so when the
 * network reorders two updates to the same key, the replica applies the older
 * one last and keeps a stale value. With an in-order network it is correct.
 *
 *   regkv replica   start command on n2: UDP port 7001, "set K V" / "get K"
 *   regkv client    workload on n1: for each key, two updates back to back
 *   regkv check     invariant on n1: the replica holds the last value written
 *
 * Node N is 10.0.0.N (NODE_ID). For testing on one machine without the
 * simulated network, SIM_LOOPBACK=1 puts node N on 127.0.0.1 port 7001+N.
 */

#define PORT 7001
#include "../simnet.h"
#define REPLICA 2 /* the replica is n2 */
#define NKEYS 10
#define EXPECTED "/tmp/expected"

/* ---- the replica --------------------------------------------------------- */

static _Noreturn void replica(void) {
    char keys[64][32], vals[64][32], buf[256], k[32], v[32];
    int n = 0, s = udp_socket(1);
    printf("n%d: replica listening on udp port %d\n", me, PORT);
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        int r = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &fl);
        if (r <= 0) continue;
        buf[r] = 0;
        int i;
        if (sscanf(buf, "set %31s %31s", k, v) == 2) {
            for (i = 0; i < n && strcmp(keys[i], k); i++) {}
            if (i == n && n < 64) strcpy(keys[n++], k);
            if (i < 64) {
                /* BUG: applied in arrival order. Nothing tells an older
                 * update from a newer one, so a reordered "set" wins. */
                strcpy(vals[i], v);
                printf("n%d: applied set %s=%s\n", me, k, v);
            }
        } else if (sscanf(buf, "get %31s", k) == 1) {
            for (i = 0; i < n && strcmp(keys[i], k); i++) {}
            char out[80];
            snprintf(out, sizeof out, "val %s %s", k, i < n ? vals[i] : "-");
            sendto(s, out, strlen(out), 0, (struct sockaddr *)&from, fl);
        }
    }
}

/* ---- client and check ---------------------------------------------------- */

/* Reads key k from the replica, retrying; returns 0 if it never answered. */
static int get(int s, const char *k, char *val) {
    char req[64], buf[256], rk[32];
    snprintf(req, sizeof req, "get %s", k);
    for (int try = 0; try < 10; try++) {
        send_to(s, REPLICA, req);
        while (recv_timeout(s, buf, sizeof buf, 500))
            if (sscanf(buf, "val %31s %31s", rk, val) == 2 && !strcmp(rk, k)) return 1;
    }
    return 0;
}

/* Compares the replica with /tmp/expected; returns the number of bad keys. */
static int check(void) {
    FILE *f = fopen(EXPECTED, "r");
    if (!f) { printf("CHECK FAILED: %s missing (did the workload run?)\n", EXPECTED); return 1; }
    char k[32], want[32], got[32];
    int s = udp_socket(0), bad = 0, keys = 0;
    while (fscanf(f, "%31s %31s", k, want) == 2) {
        keys++;
        if (!get(s, k, got)) {
            printf("CHECK FAILED: replica n%d did not answer 'get %s'\n", REPLICA, k);
            bad++;
        } else if (strcmp(got, want)) {
            printf("PROPERTY VIOLATED: replica n%d has %s=%s, but the last value written was %s "
                   "(two updates arrived out of order and the older one was applied last)\n",
                   REPLICA, k, got, want);
            bad++;
        }
    }
    fclose(f);
    if (!bad) printf("PROPERTY HOLDS: replica n%d holds the last value written for all %d keys\n", REPLICA, keys);
    return bad;
}

static int client(void) {
    int s = udp_socket(0);
    char val[32], msg[64];
    if (!get(s, "ping", val)) { printf("n%d: replica n%d never answered\n", me, REPLICA); return 1; }
    FILE *f = fopen(EXPECTED, "w");
    for (int i = 1; i <= NKEYS; i++) {
        /* Two updates of the same key, back to back: old value, then new. */
        snprintf(msg, sizeof msg, "set x%d %d", i, 2 * i - 1);
        send_to(s, REPLICA, msg);
        snprintf(msg, sizeof msg, "set x%d %d", i, 2 * i);
        send_to(s, REPLICA, msg);
        printf("n%d: wrote x%d=%d then x%d=%d\n", me, i, 2 * i - 1, i, 2 * i);
        fprintf(f, "x%d %d\n", i, 2 * i);
        usleep(100 * 1000);
    }
    fclose(f);
    sleep(1); /* let every update land (reorder delays are far shorter) */
    check();  /* print the verdict; the [[invariant]] is what fails the run */
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    me = node_id();
    if (argc == 2 && !strcmp(argv[1], "replica")) replica();
    if (argc == 2 && !strcmp(argv[1], "client")) return client();
    if (argc == 2 && !strcmp(argv[1], "check")) return check() ? 1 : 0;
    fprintf(stderr, "usage: regkv replica|client|check\n");
    return 2;
}

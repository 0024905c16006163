/* stages: a bug behind K rare states in a row, to show what coverage-guided
 * exploration (--strategy coverage) reaches that an unguided walk does not.
 *
 * n1 (`stages client K N`, the workload) runs K rounds, 100 ms apart; in
 * round r it sends N datagrams "r 1" .. "r N" to n2 back to back, so that
 * all of them are in flight at once and the network (simcluster's
 * strategy: datagram_order = "any") picks the order they arrive in.
 *
 * n2 (`stages server K N`, its start command) is at stage s (0 at first). A
 * round r = s + 1 whose datagrams all arrive in reverse order (N first, 1
 * last) moves it to stage r, and it prints `@reached stage-r`; any other
 * order leaves it where it is, and later rounds cannot move it either.
 * Reaching stage K is the bug: `stages check` (the invariant, on n1) asks
 * n2 for its stage and fails at K.
 *
 * With a reversal that happens with probability p per round, an execution
 * reaches stage K with probability p^K; an execution started from one that
 * reached stage r - 1 (replaying it up to there) reaches stage r with
 * probability p.
 */
#define PORT 7030
#include "../simnet.h"

static _Noreturn void server(int k, int n) {
    int s = udp_socket(1), stage = 0, round = 0, expect = 0;
    char buf[64];
    for (;;) {
        struct peer from;
        recv_from_peer(s, buf, sizeof buf, &from);
        if (!strcmp(buf, "stage?")) {
            char msg[32];
            snprintf(msg, sizeof msg, "stage %d", stage);
            reply_to(s, &from, msg);
            continue;
        }
        int rr, j;
        if (sscanf(buf, "%d %d", &rr, &j) != 2 || rr != stage + 1) continue;
        if (rr != round) { round = rr; expect = n; }
        /* The round's datagrams must come N, N-1, ..., 1. */
        if (expect == 0 || j != expect) { expect = 0; continue; }
        if (--expect == 0) {
            stage = rr;
            printf("@reached stage-%d\n", stage);
            if (stage == k) printf("n2: all %d stages passed: the bug\n", k);
            fflush(stdout);
        }
    }
}

static int client(int k, int n) {
    int s = udp_socket(0);
    char buf[32];
    for (int r = 1; r <= k; r++) {
        for (int j = 1; j <= n; j++) {
            snprintf(buf, sizeof buf, "%d %d", r, j);
            send_to(s, 2, buf);
        }
        usleep(100000);
    }
    return 0;
}

static int check(int k) {
    int s = udp_socket(0);
    char buf[32];
    for (int i = 0; i < 50; i++) {
        send_to(s, 2, "stage?");
        if (recv_timeout(s, buf, sizeof buf, 200) && !strncmp(buf, "stage ", 6)) {
            int stage = atoi(buf + 6);
            if (stage >= k) {
                printf("PROPERTY VIOLATED: n2 passed all %d stages\n", k);
                return 1;
            }
            printf("PROPERTY HOLDS: n2 stopped at stage %d of %d\n", stage, k);
            return 0;
        }
    }
    printf("CHECK FAILED: n2 never answered\n");
    return 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    me = node_id();
    int k = argc > 2 ? atoi(argv[2]) : 4, n = argc > 3 ? atoi(argv[3]) : 2;
    if (argc > 1 && !strcmp(argv[1], "server")) server(k, n);
    if (argc > 1 && !strcmp(argv[1], "client")) return client(k, n);
    if (argc > 1 && !strcmp(argv[1], "check")) return check(k);
    fprintf(stderr, "usage: stages server|client|check [K [N]]\n");
    return 2;
}

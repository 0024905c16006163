/* token: two nodes pass a token back and forth over UDP, 20 passes in all.
 *
 * n2 announces itself ("ready", repeated until the token shows up); n1 then
 * sends "token 1". Whoever receives "token K" holds it for 200 ms and sends
 * "token K+1" to the other node. When n1 receives "token 20" it writes
 * /tmp/done: the progress that must eventually happen.
 *
 * KNOWN BUG (on purpose): a token message is sent once and never again.
 * If the network loses one, the sender believes the other node has the
 * token and the receiver never got it: both wait for each other forever.
 * Nothing crashes and no safety property is broken; the cluster just stops
 * making progress. With a loss-free network it finishes in about 4 s.
 *
 *   token node   start command on n1 and n2 (UDP port 7004)
 *
 * Node N is 10.0.0.N. SIM_LOOPBACK=1 (one machine, no simulated network) puts
 * node N on 127.0.0.1 port 7004+N.
 */

#define PORT 7004
#include "../simnet.h"
#define PASSES 20
#define DONE "/tmp/done"

static int node(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0), other = me == 1 ? 2 : 1, last = 0, k;
    struct sockaddr_in a = node_addr(me);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("token: socket"); return 2; }
    char buf[64];
    if (me > 2) { printf("n%d: not part of the token ring; idle\n", me); for (;;) pause(); }
    printf("n%d: up\n", me);

    /* Start-up: n2 says "ready" every 500 ms until it has seen a token, so
     * that n1 does not send the first token before n2 listens. */
    if (me == 1) {
        while (!recv_timeout(s, buf, sizeof buf, 5000) || strcmp(buf, "ready"))
            printf("n1: waiting for n2 to be ready\n");
        printf("n1: n2 is ready; sending token 1\n");
        send_to(s, 2, "token 1");
        last = 1;
    } else {
        send_to(s, 1, "ready");
    }

    for (;;) {
        int got = recv_timeout(s, buf, sizeof buf, me == 2 && last == 0 ? 500 : 5000);
        if (!got) {
            if (me == 2 && last == 0) { send_to(s, 1, "ready"); continue; }
            if (last < PASSES)
                printf("n%d: still waiting for token %d (last seen: %d)\n", me, last + 1, last);
            /* BUG: waiting is all it does. It never resends the token it
             * passed on, nor asks the other node where the token is. */
            continue;
        }
        if (sscanf(buf, "token %d", &k) != 1 || k <= last) continue; /* stale or duplicate */
        last = k;
        printf("n%d: got token %d\n", me, k);
        if (k >= PASSES) {
            FILE *f = fopen(DONE, "w");
            if (f) fclose(f);
            printf("n%d: token made %d passes: done\n", me, k);
            continue;
        }
        usleep(200 * 1000); /* hold the token: the "work" */
        snprintf(buf, sizeof buf, "token %d", k + 1);
        send_to(s, other, buf); /* BUG: sent once, no ack, no retry */
        last = k + 1;
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    me = node_id();
    if (argc == 2 && !strcmp(argv[1], "node")) return node();
    fprintf(stderr, "usage: token node\n");
    return 2;
}

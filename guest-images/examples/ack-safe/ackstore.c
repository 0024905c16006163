/* ackstore: a one-node store that acknowledges writes, with or without
 * syncing them first, and a client that checks after a power loss that
 * every acknowledged write survived.
 *
 * n2 (`ackstore server sync|nosync`, its start command) appends each value a
 * client puts to /data/log on its data disk (ext4 on simcluster's
 * virtio-blk) and answers "ok V".
 *
 *   sync (correct): append, fsync, then answer. An acknowledged value is on
 *   the disk before anyone hears of it.
 *
 *   nosync (KNOWN BUG): append, answer. The value sits in the guest's page
 *   cache until ext4's next journal commit (up to 5 s later), and no disk
 *   request shows it before then: a power loss in that window loses values
 *   that were acknowledged. simcluster offers a crash just after a node
 *   sends something (here: the acknowledgement) for this reason.
 *
 * n1 (`ackstore client`, the workload) puts 1..10, one at a time, retrying
 * each until it is acknowledged, 200 ms apart; waits 7 s (n2 may be
 * rebooting); then asks n2 for what it holds until n2 answers.
 * `ackstore check` (the invariant) fails when an acknowledged value is
 * missing.
 *
 * `ackstore client set` does the same and also records what it saw as a
 * set history (checker/src/collection_history.rs): an add per value (ok
 * when acknowledged, info when n2 never answered) and the final dump as
 * a read of the whole set, printed between "@history begin" and
 * "@history end" for `[check] model = "set"` (ack-unsafe-set/,
 * ack-safe-set/): simcluster finds a lost acknowledged value in it with
 * no invariant of the example's own.
 */
#include <errno.h>
#include <fcntl.h>

#define PORT 7020
#include "../simnet.h"
#define DIR "/data"
#define LOG DIR "/log"
#define VALUES 10

static void must(int ok, const char *what) {
    if (!ok) { printf("n2: %s: %s\n", what, strerror(errno)); exit(2); }
}

/* The values in the log, as "have 1 2 3" (at most what a datagram holds). */
static void held(char *out, size_t n) {
    char buf[512];
    int fd = open(LOG, O_RDONLY);
    ssize_t r = fd < 0 ? 0 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0) close(fd);
    buf[r > 0 ? r : 0] = 0;
    size_t used = (size_t)snprintf(out, n, "have");
    for (char *v = strtok(buf, "\n"); v && used + 12 < n; v = strtok(NULL, "\n"))
        used += (size_t)snprintf(out + used, n - used, " %s", v);
}

static _Noreturn void server(int sync) {
    int s = udp_socket(1);
    char buf[64], msg[600];
    int fresh = access(LOG, F_OK) != 0;
    int fd = open(LOG, O_WRONLY | O_CREAT | O_APPEND, 0644);
    must(fd >= 0, "open " LOG);
    if (fresh) {
        /* The file itself is durable before the first value goes in. */
        must(fsync(fd) == 0, "fsync " LOG);
        int d = open(DIR, O_RDONLY | O_DIRECTORY);
        must(d >= 0 && fsync(d) == 0, "fsync " DIR);
        close(d);
    }
    held(msg, sizeof msg);
    printf("n2: %s boot, %s; answering %s\n", fresh ? "first" : "later", msg,
           sync ? "after fsync" : "at once (NO fsync)");
    fflush(stdout);
    for (;;) {
        struct peer from;
        recv_from_peer(s, buf, sizeof buf, &from);
        if (!strncmp(buf, "put ", 4)) {
            char line[32];
            int len = snprintf(line, sizeof line, "%d\n", atoi(buf + 4));
            must(write(fd, line, (size_t)len) == len, "write " LOG);
            if (sync) must(fsync(fd) == 0, "fsync " LOG);
            snprintf(msg, sizeof msg, "ok %d", atoi(buf + 4));
        } else if (!strcmp(buf, "dump")) {
            held(msg, sizeof msg);
        } else {
            continue;
        }
        reply_to(s, &from, msg);
    }
}

/* The set history of `client set`: one line per event, printed at the end. */
static char history[2 * VALUES + 2][700];
static int events, recording;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void record(int process, const char *type, const char *f, const char *value) {
    if (!recording) return;
    long long t = now_ns();
    snprintf(history[events++], sizeof history[0], "{\"process\":%d,\"type\":\"%s\",\"time\":%lld,\"f\":\"%s\",\"value\":%s}",
             process, type, t, f, value);
}

/* "have 1 2 2 3" as the JSON array [1,2,3]: the set the log holds. */
static void as_set(const char *have, char *out, size_t n) {
    int seen[VALUES + 1] = {0}, v, used = 0;
    size_t len = (size_t)snprintf(out, n, "[");
    for (const char *p = have + 4; sscanf(p, " %d%n", &v, &used) == 1; p += used) {
        if (v >= 1 && v <= VALUES && seen[v]++) continue;
        len += (size_t)snprintf(out + len, n - len, "%s%d", len > 1 ? "," : "", v);
    }
    snprintf(out + len, n - len, "]");
}

static int client(int set) {
    int s = udp_socket(1);
    recording = set;
    int process = 0;
    char buf[600], want[16], value[16];
    FILE *f = fopen("/tmp/acked", "w");
    for (int v = 1; v <= VALUES; v++) {
        snprintf(want, sizeof want, "ok %d", v);
        snprintf(value, sizeof value, "%d", v);
        record(process, "invoke", "add", value);
        int acked = 0;
        for (long long t0 = now_ms(); now_ms() - t0 < 5000;) {
            snprintf(buf, sizeof buf, "put %d", v);
            send_to(s, 2, buf);
            if (recv_timeout(s, buf, sizeof buf, 300) && !strcmp(buf, want)) {
                record(process, "ok", "add", value);
                acked = 1;
                fprintf(f, "%d\n", v);
                fflush(f);
                printf("n1: %d acknowledged\n", v);
                break;
            }
        }
        /* Unknown whether it took effect; the next op is a fresh process. */
        if (!acked) record(process++, "info", "add", value);
        usleep(200000);
    }
    fclose(f);
    sleep(7);
    int ok = 0;
    record(process, "invoke", "read", "null");
    for (long long t0 = now_ms(); now_ms() - t0 < 60000;) {
        send_to(s, 2, "dump");
        if (recv_timeout(s, buf, sizeof buf, 500) && !strncmp(buf, "have", 4)) {
            char elements[600];
            as_set(buf, elements, sizeof elements);
            record(process, "ok", "read", elements);
            printf("n1: n2 says %s\n", buf);
            f = fopen("/tmp/held", "w");
            fprintf(f, "%s\n", buf);
            fclose(f);
            ok = 1;
            break;
        }
    }
    if (!ok) {
        record(process, "info", "read", "null");
        printf("n1: n2 never answered\n");
    }
    if (set) {
        printf("@history begin\n");
        for (int i = 0; i < events; i++) printf("%s\n", history[i]);
        printf("@history end\n");
    }
    return ok ? 0 : 1;
}

static int check(void) {
    char held_[600] = "", tok[16];
    FILE *f = fopen("/tmp/held", "r");
    if (!f || !fgets(held_, sizeof held_, f)) { printf("CHECK FAILED: n2's values were never read\n"); return 1; }
    fclose(f);
    held_[strcspn(held_, "\n")] = 0;
    f = fopen("/tmp/acked", "r");
    int v, acked = 0, lost = 0;
    while (f && fscanf(f, "%d", &v) == 1) {
        acked++;
        snprintf(tok, sizeof tok, " %d", v);
        /* " V" followed by a space or the end. */
        char *p = held_;
        int found = 0;
        while ((p = strstr(p, tok))) {
            char c = p[strlen(tok)];
            if (c == ' ' || c == 0) { found = 1; break; }
            p++;
        }
        if (!found) {
            printf("PROPERTY VIOLATED: n2 acknowledged %d, but after the power loss it holds \"%s\"\n", v, held_);
            lost++;
        }
    }
    if (f) fclose(f);
    if (lost) return 1;
    printf("PROPERTY HOLDS: all %d acknowledged values kept (%s)\n", acked, held_);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    me = node_id();
    if (argc == 3 && !strcmp(argv[1], "server")) server(!strcmp(argv[2], "sync"));
    if (argc == 2 && !strcmp(argv[1], "client")) return client(0);
    if (argc == 3 && !strcmp(argv[1], "client") && !strcmp(argv[2], "set")) return client(1);
    if (argc == 2 && !strcmp(argv[1], "check")) return check();
    fprintf(stderr, "usage: ackstore server sync|nosync | client [set] | check\n");
    return 2;
}

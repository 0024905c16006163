/* safefile: replace a file's content, the right way or the wrong way, and
 * check after a power loss that an acknowledged update survived.
 *
 * n2 (the writer, `safefile writer safe|unsafe`, its start command) keeps
 * /data/f on its data disk (ext4 on simcluster's virtio-blk). On a boot that
 * finds no /data/f it writes "old" the right way, waits a second, replaces
 * it with "new" and then acknowledges the update to n1 over UDP. Then, and on
 * every later boot, it answers "get" with the file's content.
 *
 * The right way (safe): write f.tmp, fsync(f.tmp), rename(f.tmp, f),
 * fsync(/data). Once rename's directory entry is synced the new content is
 * durable; only then is the update acknowledged.
 *
 * KNOWN BUG (unsafe): write f.tmp, rename(f.tmp, f), acknowledge. Nothing
 * is durable until ext4's next journal commit (up to 5 s later). A power
 * loss in that window brings the node back with the old content (or, on
 * file systems without ext4's rename heuristics, an empty file), although
 * the update was acknowledged.
 *
 * n1 (`safefile client`, the workload) waits for the acknowledgement, lets
 * 6 virtual seconds pass, then asks n2 for the content until n2 answers (it
 * may be rebooting). `safefile check` (the invariant) fails when an
 * acknowledged update is missing or the content is neither version.
 */
#include <errno.h>
#include <fcntl.h>

#define PORT 7010
#include "../simnet.h"
#define DIR "/data"
#define FILE_ DIR "/f"
#define TMP DIR "/f.tmp"

static void must(int ok, const char *what) {
    if (!ok) { printf("n2: %s: %s\n", what, strerror(errno)); exit(2); }
}

/* Replaces /data/f with `content`; `safe` adds the two fsyncs. */
static void replace(const char *content, int safe) {
    int fd = open(TMP, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    must(fd >= 0, "open f.tmp");
    must(write(fd, content, strlen(content)) == (ssize_t)strlen(content), "write f.tmp");
    if (safe) must(fsync(fd) == 0, "fsync f.tmp");
    close(fd);
    must(rename(TMP, FILE_) == 0, "rename");
    if (safe) {
        int d = open(DIR, O_RDONLY | O_DIRECTORY);
        must(d >= 0 && fsync(d) == 0, "fsync " DIR);
        close(d);
    }
}

/* The file's content, "<missing>" or "<empty>". */
static void read_content(char *buf, size_t n) {
    int fd = open(FILE_, O_RDONLY);
    if (fd < 0) { snprintf(buf, n, "<missing>"); return; }
    ssize_t r = read(fd, buf, n - 1);
    close(fd);
    if (r <= 0) { snprintf(buf, n, "<empty>"); return; }
    buf[r] = 0;
}

static _Noreturn void writer(int safe) {
    int s = udp_socket(1);
    char buf[64], msg[80];
    if (access(FILE_, F_OK) != 0) {
        replace("old", 1);
        printf("n2: wrote \"old\" (synced)\n");
        sleep(1);
        replace("new", safe);
        printf("n2: replaced with \"new\" (%s); acknowledging\n", safe ? "write, fsync, rename, fsync dir" : "write, rename: NO fsync");
        for (int i = 0; i < 3; i++) send_to(s, 1, "acked");
    } else {
        read_content(buf, sizeof buf);
        printf("n2: booted with /data/f = \"%s\"\n", buf);
    }
    fflush(stdout);
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t r = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &fl);
        if (r <= 0) continue;
        buf[r] = 0;
        if (!strcmp(buf, "get")) {
            char c[64];
            read_content(c, sizeof c);
            snprintf(msg, sizeof msg, "content %s", c);
            sendto(s, msg, strlen(msg), 0, (struct sockaddr *)&from, fl);
        }
    }
}

static int client(void) {
    int s = udp_socket(1), acked = 0;
    char buf[80];
    long long start = now_ms(), acked_at = 0;
    while (!acked && now_ms() - start < 10000) {
        if (recv_timeout(s, buf, sizeof buf, 500) && !strcmp(buf, "acked")) {
            acked = 1;
            acked_at = now_ms();
        }
    }
    FILE *f = fopen("/tmp/acked", "w");
    fprintf(f, "%d\n", acked);
    fclose(f);
    printf("n1: update %s\n", acked ? "acknowledged by n2" : "never acknowledged");
    long long wait_until = (acked ? acked_at : now_ms()) + 6000;
    while (now_ms() < wait_until) usleep(100000);
    for (long long t0 = now_ms(); now_ms() - t0 < 60000;) {
        send_to(s, 2, "get");
        if (recv_timeout(s, buf, sizeof buf, 500) > 8 && !strncmp(buf, "content ", 8)) {
            printf("n1: n2 says /data/f = \"%s\"\n", buf + 8);
            f = fopen("/tmp/content", "w");
            fprintf(f, "%s\n", buf + 8);
            fclose(f);
            return 0;
        }
    }
    printf("n1: n2 never answered\n");
    return 1;
}

static int check(void) {
    int acked = 0;
    char content[64] = "";
    FILE *f = fopen("/tmp/acked", "r");
    if (f) { if (fscanf(f, "%d", &acked) != 1) acked = 0; fclose(f); }
    f = fopen("/tmp/content", "r");
    if (!f || !fgets(content, sizeof content, f)) { printf("CHECK FAILED: no content recorded\n"); return 1; }
    fclose(f);
    content[strcspn(content, "\n")] = 0;
    if (acked && strcmp(content, "new")) {
        printf("PROPERTY VIOLATED: n2 acknowledged the update to \"new\", but after the power loss /data/f is \"%s\"\n", content);
        return 1;
    }
    if (strcmp(content, "new") && strcmp(content, "old") && strcmp(content, "<missing>")) {
        printf("PROPERTY VIOLATED: /data/f is \"%s\": neither the old nor the new version\n", content);
        return 1;
    }
    printf("PROPERTY HOLDS: /data/f is \"%s\"%s\n", content, acked ? " (acknowledged update kept)" : "");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    me = node_id();
    if (argc == 3 && !strcmp(argv[1], "writer")) writer(!strcmp(argv[2], "safe"));
    if (argc == 2 && !strcmp(argv[1], "client")) return client();
    if (argc == 2 && !strcmp(argv[1], "check")) return check();
    fprintf(stderr, "usage: safefile writer safe|unsafe | client | check\n");
    return 2;
}

/* The floor of a cross-process wake-up, without Python: bench_wakeup.py's c-* peers.
 *
 * bench_wakeup.py compiles this file with the system's C compiler (cc) into its temporary folder and
 * runs it as both processes of a c-* peer, as it runs Python for the other peers. Messages are
 * bench_wakeup.py's: 100 bytes whose first 8 are CLOCK_MONOTONIC in ns (little-endian, as
 * compare/common.py's stamped_value), appended to FILE.
 *
 *   wake_floor write FILE COUNT INTERVAL_NS      one message every INTERVAL_NS, on an absolute schedule
 *   wake_floor block FILE COUNT                  sleep in a blocking read of an inotify descriptor
 *                                                watching FILE, then pread what is new
 *   wake_floor poll FILE COUNT POLL_NS           pread, and sleep POLL_NS when nothing is new (SQLite's
 *                                                reader in bench_wakeup.py, without SQLite)
 *
 * A reader creates FILE.ready once it watches FILE (the writer is started then), and prints its
 * latencies in ns as a JSON list once it has COUNT messages.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

enum { MESSAGE_BYTES = 100 };

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int fail(const char *what) {
    perror(what);
    return 1;
}

static int write_messages(const char *path, long count, int64_t interval_ns) {
    int fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0) return fail("open");
    unsigned char message[MESSAGE_BYTES];
    memset(message, 'x', sizeof message);
    int64_t started = now_ns();
    for (long i = 0; i < count; i++) {
        int64_t at = started + i * interval_ns;
        struct timespec until = {(time_t)(at / 1000000000), (long)(at % 1000000000)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) != 0) {
        }
        int64_t stamp = now_ns();
        memcpy(message, &stamp, sizeof stamp); /* x86-64 and arm64 Linux: little-endian */
        if (write(fd, message, sizeof message) != (ssize_t)sizeof message) return fail("write");
    }
    return close(fd);
}

static int read_messages(const char *path, long count, int blocking, int64_t poll_ns) {
    int data = open(path, O_RDONLY);
    int inotify = inotify_init1(IN_CLOEXEC);
    if (data < 0 || inotify < 0 || inotify_add_watch(inotify, path, IN_MODIFY) < 0) return fail("open");
    int64_t *latencies = malloc(sizeof *latencies * (size_t)count);
    if (latencies == NULL) return fail("malloc");
    char ready[4096];
    snprintf(ready, sizeof ready, "%s.ready", path);
    int ready_fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (ready_fd < 0 || close(ready_fd) != 0) return fail("ready");
    static unsigned char buffer[1 << 16];
    static char events[4096];
    long taken = 0;
    off_t position = 0;
    while (taken < count) {
        ssize_t got = pread(data, buffer, sizeof buffer, position);
        if (got < 0) return fail("pread");
        ssize_t whole = got - got % MESSAGE_BYTES;
        if (whole > 0) {
            int64_t now = now_ns();
            for (ssize_t at = 0; at < whole && taken < count; at += MESSAGE_BYTES) {
                int64_t stamp;
                memcpy(&stamp, buffer + at, sizeof stamp);
                latencies[taken++] = now - stamp;
            }
            position += whole;
        } else if (blocking) {
            if (read(inotify, events, sizeof events) < 0) return fail("read");
        } else {
            struct timespec pause = {(time_t)(poll_ns / 1000000000), (long)(poll_ns % 1000000000)};
            nanosleep(&pause, NULL);
        }
    }
    putchar('[');
    for (long i = 0; i < count; i++) printf(i ? ",%lld" : "%lld", (long long)latencies[i]);
    puts("]");
    free(latencies);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[1], "block") != 0 && argc < 5)) {
        fprintf(stderr, "usage: %s write FILE COUNT INTERVAL_NS | block FILE COUNT | poll FILE COUNT POLL_NS\n",
                argv[0]);
        return 2;
    }
    long count = atol(argv[3]);
    if (strcmp(argv[1], "write") == 0) return write_messages(argv[2], count, atoll(argv[4]));
    if (strcmp(argv[1], "block") == 0) return read_messages(argv[2], count, 1, 0);
    if (strcmp(argv[1], "poll") == 0) return read_messages(argv[2], count, 0, atoll(argv[4]));
    fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
    return 2;
}

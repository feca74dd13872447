/*
 * attack.c — a native worker that tries to leave its sandbox, one attack
 * per event type (tests/integration/test_sandbox_native.py builds it with
 * `cc -shared -fPIC` at test time and runs it in wm-host-native).
 *
 * Each attack is one system call with harmless arguments where the call
 * could succeed (a socket never connected, a mount of nothing on a path
 * that does not exist, fork's child exits at once).  A call the filter
 * kills never returns: the host dies by SIGSYS.  A call that returns is
 * reported as a worker error, "<attack>: returned R, errno E (text)", so
 * the test sees what the kernel answered; an attack that needs a number
 * (signal: a pid) takes it from the event's data.  Positive controls: echo (the
 * event back) and thread (a thread started and joined, what a worker's own
 * threads need).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <workmanager/worker_api.h>

int32_t Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
                uint8_t **out_buf, int32_t *out_len);
void FreeResult(uint8_t *buf);

/* The outcome of a call that returned. */
static int32_t
report(const char *attack, long rc, int err, uint8_t **out_buf,
       int32_t *out_len)
{
    char msg[256];

    snprintf(msg, sizeof msg, "%s: returned %ld, errno %d (%s)", attack, rc,
             err, strerror(err));
    return virtufin_response_error(msg, out_buf, out_len);
}

/* Held by the threadbomb for good: its threads block on it (a futex,
 * which the filters allow) until the host ends. */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;

static void *
thread_wait(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate);
    pthread_mutex_unlock(&gate);
    return NULL;
}

static void *
thread_main(void *arg)
{
    *(int *)arg = 42;
    return arg;
}

static long
attack(const char *type, long arg, int *err)
{
    long rc = -1;

    errno = 0;
    if (strcmp(type, "socket") == 0) {
        rc = socket(AF_INET, SOCK_STREAM, 0);
    } else if (strcmp(type, "execve") == 0) {
        char *const argv[] = { (char *)"sh", (char *)"-c", (char *)"true",
                               NULL };
        char *const envp[] = { NULL };
        rc = execve("/bin/sh", argv, envp);
    } else if (strcmp(type, "fork") == 0) {
        rc = fork();
        if (rc == 0)
            _exit(0);
        if (rc > 0)
            waitpid((pid_t)rc, NULL, 0);
    } else if (strcmp(type, "ptrace") == 0) {
        rc = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
    } else if (strcmp(type, "mount") == 0) {
        rc = mount("none", "/nonexistent-wm-sandbox-test", "tmpfs", 0, NULL);
    } else if (strcmp(type, "unshare") == 0) {
        rc = unshare(CLONE_NEWUSER);
    } else if (strcmp(type, "kill") == 0) {
        rc = kill(1, 0); /* init: signal 0 only asks whether it could */
    } else if (strcmp(type, "signal") == 0) {
        /* SIGKILL to a process outside its namespace (the event's data
         * is its pid as the daemon sees it): the master, another host. */
        rc = kill((pid_t)arg, SIGKILL);
    } else if (strcmp(type, "write_usr") == 0) {
        /* A file outside /tmp, created for writing. */
        rc = open("/usr/wm-sandbox-test", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    } else if (strcmp(type, "spin") == 0) {
        /* No system call at all, forever: only a deadline ends it. */
        for (volatile unsigned long i = 0;; i++)
            ;
    } else if (strcmp(type, "shadow") == 0) {
        rc = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
    } else if (strcmp(type, "mmap_exec") == 0) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        rc = p == MAP_FAILED ? -1 : 0;
    } else if (strcmp(type, "x32_socket") == 0) {
        /* The x32 ABI's numbers: bit 30 set. */
        rc = syscall(SYS_socket | 0x40000000, AF_INET, SOCK_STREAM, 0);
#if defined(__x86_64__)
    } else if (strcmp(type, "i386_socket") == 0) {
        /* The i386 ABI through int 0x80: socket is 359 there. */
        __asm__ volatile("int $0x80"
                         : "=a"(rc)
                         : "a"(359L), "b"(2L), "c"(1L), "d"(0L)
                         : "memory");
        if (rc < 0 && rc > -4096) {
            errno = (int)-rc;
            rc = -1;
        }
#endif
    } else if (strcmp(type, "membomb") == 0) {
        /* 1 GiB in 16 MiB pieces, touched a page at a time: the memory
         * limit's OOM killer ends the host long before (or an mmap fails
         * under RLIMIT_AS, reported).  Kept until the end: a leak. */
        const size_t piece = (size_t)16 << 20;
        rc = 0;
        for (size_t got = 0; got < (size_t)1 << 30; got += piece) {
            char *p = mmap(NULL, piece, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) {
                rc = -1;
                break;
            }
            for (size_t i = 0; i < piece; i += 4096)
                p[i] = 1;
        }
    } else if (strcmp(type, "threadbomb") == 0) {
        /* Threads until pthread_create fails (pids.max counts threads),
         * each blocked on the gate. */
        static int held;
        pthread_t t;
        long n = 0;
        if (!held++)
            pthread_mutex_lock(&gate);
        for (; n < 100000; n++) {
            int e = pthread_create(&t, NULL, thread_wait, NULL);
            if (e != 0) {
                errno = e;
                break;
            }
            pthread_detach(t);
        }
        rc = n; /* threads started before the first refusal */
    } else if (strcmp(type, "thread") == 0) {
        pthread_t t;
        int v = 0;
        void *back = NULL;
        rc = pthread_create(&t, NULL, thread_main, &v);
        if (rc == 0) {
            rc = pthread_join(t, &back);
            if (rc == 0 && (back != &v || v != 42))
                rc = -2;
        } else {
            errno = (int)rc;
            rc = -1;
        }
    } else {
        errno = ENOSYS;
    }
    *err = errno;
    return rc;
}

int32_t
Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
        uint8_t **out_buf, int32_t *out_len)
{
    struct virtufin_event ev;
    char type[64];
    int err;
    long rc;

    (void)host;
    if (virtufin_event_read(in_buf, in_len, &ev) != VIRTUFIN_OK)
        return virtufin_response_error("the input is not a CloudEvent", out_buf,
                                       out_len);
    snprintf(type, sizeof type, "%.*s", (int)ev.type.len,
             ev.type.ptr ? ev.type.ptr : "");
    if (strcmp(type, "echo") == 0)
        return virtufin_response_event(&ev, out_buf, out_len);
    /* The event's data, when a number, is the attack's argument. */
    char num[24] = "";
    if (ev.data.len > 0 && ev.data.len < sizeof num)
        memcpy(num, ev.data.ptr, ev.data.len);
    rc = attack(type, strtol(num, NULL, 10), &err);
    if (strcmp(type, "thread") == 0 && rc == 0)
        return virtufin_response_event(&ev, out_buf, out_len);
    return report(type, rc, err, out_buf, out_len);
}

void
FreeResult(uint8_t *buf)
{
    virtufin_response_free(buf);
}

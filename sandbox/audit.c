/*
 * audit.c — seccomp kills from the kernel's audit log (audit.h).
 */
#include "config.h"

#include "sandbox/audit.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef WM_SANDBOX
#include <seccomp.h>
#endif

int
sandbox_audit_open(char *err, size_t errlen)
{
    struct sockaddr_nl a = {
        .nl_family = AF_NETLINK,
        .nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1),
    };
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    NETLINK_AUDIT);

    if (fd < 0) {
        snprintf(err, errlen, "audit socket: %s", strerror(errno));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int saved = errno;
        snprintf(err, errlen, "joining the audit log group: %s",
                 strerror(saved));
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* The value of " key=" in text[0..len) as a number in base, or -1. */
static long long
field(const char *text, size_t len, const char *key, int base)
{
    size_t klen = strlen(key);

    for (size_t i = 0; i + klen < len; i++) {
        if ((i == 0 || text[i - 1] == ' ') &&
            memcmp(text + i, key, klen) == 0 && text[i + klen] == '=') {
            char num[24];
            size_t n = 0;

            for (size_t j = i + klen + 1;
                 j < len && n < sizeof num - 1 && text[j] != ' '; j++)
                num[n++] = text[j];
            num[n] = '\0';
            char *end;
            errno = 0;
            long long v = strtoll(num, &end, base);
            if (n == 0 || *end || errno || v < 0)
                return -1;
            return v;
        }
    }
    return -1;
}

int
sandbox_audit_parse(const char *text, size_t len, struct sandbox_audit_kill *k)
{
    long long pid = field(text, len, "pid", 10);
    long long sig = field(text, len, "sig", 10);
    long long nr = field(text, len, "syscall", 10);
    long long arch = field(text, len, "arch", 16);

    /* sig is the signal the verdict kills with: 0 for log and errno. */
    if (pid <= 0 || sig <= 0 || nr < 0 || arch < 0 || pid > INT32_MAX ||
        nr > INT32_MAX || arch > UINT32_MAX)
        return -1;
    k->pid = (pid_t)pid;
    k->syscall = (int)nr;
    k->arch = (uint32_t)arch;
    return 0;
}

unsigned
sandbox_audit_read(int fd,
                   void (*cb)(void *arg, const struct sandbox_audit_kill *k),
                   void *arg)
{
    unsigned n = 0;

    for (;;) {
        /* One record per datagram: kauditd sends each on its own, and
         * its nlmsg_len is not to be trusted (older kernels counted the
         * text only), so the datagram's length bounds the text. */
        char buf[8960] __attribute__((aligned(NLMSG_ALIGNTO)));
        ssize_t got = recv(fd, buf, sizeof buf, 0);
        const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
        struct sandbox_audit_kill k;

        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return n; /* EAGAIN: nothing more; ENOBUFS: some were lost */
        if ((size_t)got > NLMSG_HDRLEN && h->nlmsg_type == AUDIT_SECCOMP &&
            sandbox_audit_parse(buf + NLMSG_HDRLEN, (size_t)got - NLMSG_HDRLEN,
                                &k) == 0) {
            cb(arg, &k);
            n++;
        }
    }
}

char *
sandbox_syscall_name(int nr, uint32_t arch, char *buf, size_t len)
{
#ifdef WM_SANDBOX
    char *name = seccomp_syscall_resolve_num_arch(arch, nr);

    if (name) {
        snprintf(buf, len, "%s", name);
        free(name);
        return buf;
    }
#else
    (void)arch;
#endif
    snprintf(buf, len, "syscall %d", nr);
    return buf;
}

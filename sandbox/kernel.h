/*
 * kernel.h — kernel constants newer than the headers sandbox/ is built
 * with (Debian 12's are Linux 6.1's): their values are the kernel's ABI,
 * so defining them here is safe; a kernel without the feature answers
 * EINVAL, which the callers take as "absent".  Private to sandbox/ and its
 * tests.
 */
#ifndef WM_SANDBOX_KERNEL_H
#define WM_SANDBOX_KERNEL_H

/* MDWE, Linux 6.3 */
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_GET_MDWE
#define PR_GET_MDWE 66
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

/* time namespaces, Linux 5.6 (in <linux/sched.h>, not in glibc 2.36's) */
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#endif

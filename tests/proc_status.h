/* Reads figures of the calling process from /proc/self/status (Linux). */
#ifndef HAKMEM_PROC_STATUS_H
#define HAKMEM_PROC_STATUS_H
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The value in KiB of a field such as "VmRSS" or "VmSize", or -1.
 * Uses open/read rather than stdio, so it allocates nothing. */
static long proc_status_kib(const char *field)
{
    char buf[8192];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    size_t len = strlen(field);
    for (const char *line = buf; *line; ) {
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            return strtol(line + len + 1, NULL, 10);
        const char *next = strchr(line, '\n');
        if (!next) break;
        line = next + 1;
    }
    return -1;
}
#endif

/* verdict.h: how a migration's child ended, as its supervisor
 * (proc/child.c) learns it: a structure, not a line to parse. The Lua
 * child (luachild.c) and the shell's supervisor (a spawn or gateway
 * failure) each write one struct child_verdict whole on the status fd, in
 * one write() under PIPE_BUF, so it arrives whole or not at all; the
 * supervisor takes it with verdict_read, which checks it before trusting a
 * byte (the magic, the reason in range, every string ended inside its
 * field). No verdict at all (a shell that exec'd bash) is the exit code's
 * to say. The write journal does not go through it: it is in memory the
 * two share (journaldoc.h's journal_log). */
#ifndef COZY_VERDICT_H
#define COZY_VERDICT_H
#include <stddef.h>
#include <stdint.h>

enum verdict_reason {
    VERDICT_OK = 0,
    VERDICT_SCRIPT_ERROR,   /* the script raised an error */
    VERDICT_TIMEOUT,        /* the Lua child's own deadline passed */
    VERDICT_MEMORY_LIMIT,   /* the memory cap was hit */
    VERDICT_LOAD_ERROR,     /* the file could not be read or compiled */
    VERDICT_SPAWN_ERROR,    /* the child could not be started: stage and err say where */
    VERDICT_GATEWAY_ERROR,  /* a shell's gateway could not be made: message says why */
    VERDICT_REASONS
};

struct child_verdict {
    uint32_t magic;         /* VERDICT_MAGIC: this is a verdict, of this build's shape */
    int32_t reason;         /* enum verdict_reason */
    int32_t err;            /* VERDICT_SPAWN_ERROR: the errno */
    char stage[16];         /* VERDICT_SPAWN_ERROR: fork, execve, chdir, landlock, ... */
    char message[1100];     /* what the script raised, or the gateway's refusal */
    char unpredictable[512]; /* a preview's write it cannot predict, and why; "" none */
};
#define VERDICT_MAGIC 0x43565244u /* "DRVC" */

/* v emptied with this reason. Async-signal-safe (used between fork and exec). */
void verdict_init(struct child_verdict *v, enum verdict_reason reason);
/* Copies s into a field of cap bytes, cut to fit and always ended.
 * Async-signal-safe. */
void verdict_set(char *field, size_t cap, const char *s);
/* Writes v whole on fd. 0, or -1. Async-signal-safe. */
int verdict_write(int fd, const struct child_verdict *v);
/* The first verdict in the len bytes read from the status fd, checked:
 * 0, or -1 when there is none whole or it is not one (v then empty,
 * VERDICT_OK with no magic: never to be taken as a verdict). */
int verdict_read(const void *buf, size_t len, struct child_verdict *v);
#endif

/*
 * group_member.c: one member of a work group (runtime/group.h), driven by
 * tests/test_group.py: a process of its own so that the test can kill it
 * with kill -9, as a node dies.
 *
 *   group_member BOOTSTRAP CLUSTER NODE_ID SESSION_MS TOPIC...
 *
 * Prints every assignment change as it is polled ("added T P", "revoked T
 * P", "lost T P"), then "assignment T:P ..." (the whole current one), and
 * "commits N" when the broker acknowledged a commit. Reads commands on
 * stdin: "commit T P OFFSET" (prints "sent N"). Exits at end of stdin.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group.h"

static void print_assignment(RtGroup *g)
{
    RtGroupPartition *a;
    int n = rt_group_assignment(g, &a);
    printf("assignment");
    for (int i = 0; i < n; i++)
        printf(" %s:%d", a[i].topic, (int)a[i].partition);
    printf("\n");
    free(a);
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: group_member BOOTSTRAP CLUSTER NODE_ID SESSION_MS TOPIC...\n");
        return 2;
    }
    RtGroupOptions opt = {.session_timeout_ms = atoi(argv[4])};
    WError err = {0};
    RtGroup *g;
    if (rt_group_open(argv[1], argv[2], argv[3], (const char *const *)argv + 5, argc - 5, &opt, &g, &err)) {
        fprintf(stderr, "group_member: %s: %s\n", err.sqlstate, err.msg);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("started\n");
    int64_t commits = 0;
    char line[512];
    for (;;) {
        RtGroupChange ch[64];
        int n = rt_group_poll(g, ch, 64);
        static const char *names[] = {"", "added", "revoked", "lost"};
        for (int i = 0; i < n; i++)
            printf("%s %s %d\n", names[ch[i].event], ch[i].topic, (int)ch[i].partition);
        rt_group_changes_free(ch, n);
        if (n > 0)
            print_assignment(g);
        RtGroupStats st;
        rt_group_stats(g, &st);
        if (st.commits != commits) {
            commits = st.commits;
            printf("commits %lld\n", (long long)commits);
        }
        struct pollfd pfd = {.fd = 0, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        if (!fgets(line, sizeof line, stdin))
            break;
        char topic[256];
        int part;
        long long off;
        if (sscanf(line, "commit %255s %d %lld", topic, &part, &off) == 3) {
            RtGroupOffset o = {topic, part, off};
            int sent = rt_group_commit(g, &o, 1, &err);
            if (sent < 0)
                printf("error %s %s\n", err.sqlstate, err.msg);
            else
                printf("sent %d\n", sent);
        }
    }
    rt_group_close(g);
    return 0;
}

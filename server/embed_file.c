/*
 * embed_file.c: a build-time tool that turns a file into a C source
 * defining `const unsigned char NAME[]` (NUL-terminated) and
 * `const unsigned int NAME_len`, so the server carries its dashboard page
 * with no file lookup at run time. Usage: embed_file INPUT OUTPUT NAME
 */
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: embed_file INPUT OUTPUT NAME\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        fclose(in);
        return 1;
    }
    fprintf(out, "/* Generated from %s by embed_file; do not edit. */\n", argv[1]);
    fprintf(out, "const unsigned char %s[] = {\n", argv[3]);
    unsigned long n = 0;
    int c;
    while ((c = fgetc(in)) != EOF) {
        fprintf(out, "%d,%s", c, ++n % 24 ? "" : "\n");
    }
    fprintf(out, "0};\nconst unsigned int %s_len = %lu;\n", argv[3], n);
    int bad = ferror(in) || fclose(out) != 0;
    fclose(in);
    if (bad) {
        fprintf(stderr, "embed_file: write failed\n");
        return 1;
    }
    return 0;
}

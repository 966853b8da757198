/*
 * crypto.c: SCRAM-SHA-256 verifiers and exchanges, and TLS, over OpenSSL.
 *
 * The only file in weir that includes OpenSSL headers (see crypto.h). The
 * SCRAM exchange follows RFC 5802 with SHA-256 (RFC 7677) the way
 * PostgreSQL's auth-scram.c does: the user name inside the SCRAM messages is
 * ignored (the startup packet's counts), channel binding is not offered, the
 * stored form is "SCRAM-SHA-256$iter:salt$StoredKey:ServerKey". Secrets are
 * compared in constant time (CRYPTO_memcmp).
 */
#include "crypto.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>

#include "arena.h"

#define KEY_LEN 32          /* SHA-256 */
#define SALT_LEN 16
#define NONCE_LEN 18        /* raw bytes of the server nonce */
#define MAX_B64 512

/* ---- base64 ------------------------------------------------------------------------------ */

static void b64_encode(const unsigned char *in, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* Decodes s[0..len) (strict: length a multiple of 4). Returns the byte
 * count, or -1. out must hold len * 3 / 4 bytes. */
static int b64_decode(const char *s, size_t len, unsigned char *out)
{
    if (len == 0 || len % 4 != 0 || len > MAX_B64)
        return -1;
    int n = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
    if (n < 0)
        return -1;
    if (s[len - 1] == '=')
        n--;
    if (s[len - 2] == '=')
        n--;
    return n;
}

/* ---- keys ----------------------------------------------------------------------------------- */

static int hmac(const unsigned char *key, size_t klen, const void *msg, size_t n, unsigned char *out)
{
    unsigned int len = KEY_LEN;
    return HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &len) ? 0 : -1;
}

static int sha256(const unsigned char *in, size_t n, unsigned char *out)
{
    return EVP_Digest(in, n, out, NULL, EVP_sha256(), NULL) ? 0 : -1;
}

/* StoredKey and ServerKey from a password, a salt and the iteration count. */
static int derive(const char *password, const unsigned char *salt, size_t salt_len, int iter,
                  unsigned char *stored, unsigned char *server)
{
    unsigned char salted[KEY_LEN], client[KEY_LEN];
    int rc = -1;
    if (PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_len, iter, EVP_sha256(), KEY_LEN,
                          salted) == 1 &&
        hmac(salted, KEY_LEN, "Client Key", 10, client) == 0 && sha256(client, KEY_LEN, stored) == 0 &&
        hmac(salted, KEY_LEN, "Server Key", 10, server) == 0)
        rc = 0;
    OPENSSL_cleanse(salted, sizeof salted);
    OPENSSL_cleanse(client, sizeof client);
    return rc;
}

int crypto_scram_verifier(const char *password, char *out, size_t n, WError *err)
{
    unsigned char salt[SALT_LEN], stored[KEY_LEN], server[KEY_LEN];
    char salt64[64], stored64[64], server64[64];
    if (RAND_bytes(salt, SALT_LEN) != 1 || derive(password, salt, SALT_LEN, SCRAM_ITERATIONS, stored, server))
        return werr(err, SQLSTATE_INTERNAL, 0, "could not compute a SCRAM verifier");
    b64_encode(salt, SALT_LEN, salt64);
    b64_encode(stored, KEY_LEN, stored64);
    b64_encode(server, KEY_LEN, server64);
    if ((size_t)snprintf(out, n, "SCRAM-SHA-256$%d:%s$%s:%s", SCRAM_ITERATIONS, salt64, stored64, server64) >= n)
        return werr(err, SQLSTATE_INTERNAL, 0, "SCRAM verifier too long");
    return 0;
}

typedef struct Verifier {
    int iter;
    unsigned char salt[MAX_B64];
    int salt_len;
    unsigned char stored[KEY_LEN], server[KEY_LEN];
} Verifier;

static int parse_verifier(const char *s, Verifier *v)
{
    if (!s || strncmp(s, "SCRAM-SHA-256$", 14) != 0 || strlen(s) > SCRAM_VERIFIER_MAX)
        return -1;
    const char *p = s + 14;
    char *end;
    long iter = strtol(p, &end, 10);
    if (end == p || *end != ':' || iter < 1 || iter > 10000000)
        return -1;
    v->iter = (int)iter;
    const char *salt = end + 1, *dollar = strchr(salt, '$');
    if (!dollar)
        return -1;
    v->salt_len = b64_decode(salt, (size_t)(dollar - salt), v->salt);
    const char *st = dollar + 1, *colon = strchr(st, ':');
    if (v->salt_len < 1 || !colon)
        return -1;
    unsigned char buf[MAX_B64];
    if (b64_decode(st, (size_t)(colon - st), buf) != KEY_LEN)
        return -1;
    memcpy(v->stored, buf, KEY_LEN);
    if (b64_decode(colon + 1, strlen(colon + 1), buf) != KEY_LEN)
        return -1;
    memcpy(v->server, buf, KEY_LEN);
    return 0;
}

bool crypto_scram_is_verifier(const char *s)
{
    Verifier v;
    return parse_verifier(s, &v) == 0;
}

/* ---- the exchange ----------------------------------------------------------------------------- */

struct ScramServer {
    Verifier v;
    bool real;                  /* false: unknown user, fail at the end */
    char gs2[8];                /* "n,," or "y,,": echoed in c= */
    char *client_first_bare;
    char *server_first;
    char *nonce;                /* client nonce + server nonce */
};

/* The per-process secret behind the made-up salts of unknown users. */
static unsigned char mock_secret[KEY_LEN];
static pthread_once_t mock_once = PTHREAD_ONCE_INIT;

static void mock_init(void)
{
    if (RAND_bytes(mock_secret, KEY_LEN) != 1)
        memset(mock_secret, 0x5a, KEY_LEN);   /* still stable; only hides user existence */
}

ScramServer *crypto_scram_new(const char *verifier, const char *user)
{
    ScramServer *s = xcalloc(1, sizeof *s);
    if (verifier && parse_verifier(verifier, &s->v) == 0) {
        s->real = true;
        return s;
    }
    /* Made-up salt and keys, stable per user name, so that an unknown user
     * looks like a known one with a wrong password. */
    pthread_once(&mock_once, mock_init);
    unsigned char mac[KEY_LEN];
    hmac(mock_secret, KEY_LEN, user ? user : "", user ? strlen(user) : 0, mac);
    memcpy(s->v.salt, mac, SALT_LEN);
    s->v.salt_len = SALT_LEN;
    s->v.iter = SCRAM_ITERATIONS;
    RAND_bytes(s->v.stored, KEY_LEN);
    RAND_bytes(s->v.server, KEY_LEN);
    return s;
}

void crypto_scram_free(ScramServer *s)
{
    if (!s)
        return;
    free(s->client_first_bare);
    free(s->server_first);
    free(s->nonce);
    OPENSSL_cleanse(s, sizeof *s);
    free(s);
}

static bool printable_nonce(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e || p[i] == ',')
            return false;
    return n > 0;
}

int crypto_scram_first(ScramServer *s, const char *msg, size_t len, Buf *out, WError *err)
{
    if (memchr(msg, 0, len))
        return werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (NUL byte)");
    char *m = xstrndup(msg, len);
    int rc = -1;
    /* gs2-header: cbind-flag "," [authzid] "," */
    if (len < 3 || (m[0] != 'n' && m[0] != 'y' && m[0] != 'p')) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (unexpected channel-binding flag)");
        goto out;
    }
    if (m[0] == 'p') {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0,
             "malformed SCRAM message: the client asked for channel binding, which weir does not offer");
        goto out;
    }
    if (m[1] != ',') {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (comma expected)");
        goto out;
    }
    if (m[2] != ',') {
        werr(err, SQLSTATE_INVALID_AUTHORIZATION, 0, "client uses authorization identity, but it is not supported");
        goto out;
    }
    memcpy(s->gs2, m, 3);
    s->gs2[3] = 0;
    const char *bare = m + 3;
    /* client-first-message-bare: n=user,r=nonce[,ext] (the user is ignored) */
    if (strncmp(bare, "n=", 2) != 0) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (n= expected)");
        goto out;
    }
    const char *r = strstr(bare, ",r=");
    if (!r) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (r= expected)");
        goto out;
    }
    const char *nonce = r + 3;
    size_t nlen = strcspn(nonce, ",");
    if (!printable_nonce(nonce, nlen) || nlen > 256) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (invalid nonce)");
        goto out;
    }
    if (nonce[nlen] == ',') {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (unsupported extension)");
        goto out;
    }
    unsigned char raw[NONCE_LEN];
    char snonce[64], salt64[MAX_B64];
    if (RAND_bytes(raw, NONCE_LEN) != 1) {
        werr(err, SQLSTATE_INTERNAL, 0, "could not generate a SCRAM nonce");
        goto out;
    }
    b64_encode(raw, NONCE_LEN, snonce);
    b64_encode(s->v.salt, (size_t)s->v.salt_len, salt64);
    s->client_first_bare = xstrdup(bare);
    Buf b = BUF_INIT;
    buf_printf(&b, "%.*s%s", (int)nlen, nonce, snonce);
    buf_putc(&b, 0);
    s->nonce = buf_take(&b);
    Buf f = BUF_INIT;
    buf_printf(&f, "r=%s,s=%s,i=%d", s->nonce, salt64, s->v.iter);
    buf_putc(&f, 0);
    s->server_first = buf_take(&f);
    buf_puts(out, s->server_first);
    rc = 0;
out:
    free(m);
    return rc;
}

int crypto_scram_final(ScramServer *s, const char *msg, size_t len, Buf *out, WError *err)
{
    if (!s->server_first)
        return werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "SCRAM final message before the first");
    if (memchr(msg, 0, len))
        return werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (NUL byte)");
    char *m = xstrndup(msg, len);
    int rc = -1;
    /* c=<base64 gs2 header>,r=<nonce>,p=<proof> */
    char gs2_64[32];
    b64_encode((const unsigned char *)s->gs2, strlen(s->gs2), gs2_64);
    char *comma = strchr(m, ',');
    if (strncmp(m, "c=", 2) != 0 || !comma || (size_t)(comma - m - 2) != strlen(gs2_64) ||
        strncmp(m + 2, gs2_64, strlen(gs2_64)) != 0) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (unexpected channel-binding data)");
        goto out;
    }
    size_t nlen = strlen(s->nonce);
    if (strncmp(comma + 1, "r=", 2) != 0 || strncmp(comma + 3, s->nonce, nlen) != 0 || comma[3 + nlen] != ',') {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (nonce does not match)");
        goto out;
    }
    char *p = strstr(comma + 3 + nlen, ",p=");
    if (!p || strchr(p + 3, ',')) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (proof expected last)");
        goto out;
    }
    unsigned char proof[MAX_B64];
    if (b64_decode(p + 3, strlen(p + 3), proof) != KEY_LEN) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "malformed SCRAM message (invalid proof)");
        goto out;
    }
    /* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
    Buf am = BUF_INIT;
    buf_printf(&am, "%s,%s,%.*s", s->client_first_bare, s->server_first, (int)(p - m), m);
    unsigned char sig[KEY_LEN], key[KEY_LEN], check[KEY_LEN];
    rc = 0;
    if (hmac(s->v.stored, KEY_LEN, am.data, am.len, sig) == 0) {
        for (int i = 0; i < KEY_LEN; i++)
            key[i] = proof[i] ^ sig[i];
        if (sha256(key, KEY_LEN, check) == 0 && CRYPTO_memcmp(check, s->v.stored, KEY_LEN) == 0 && s->real &&
            hmac(s->v.server, KEY_LEN, am.data, am.len, sig) == 0) {
            char sig64[64];
            b64_encode(sig, KEY_LEN, sig64);
            buf_printf(out, "v=%s", sig64);
            rc = 1;
        }
    }
    buf_free(&am);
    OPENSSL_cleanse(key, sizeof key);
out:
    free(m);
    return rc;
}

/* ---- TLS ------------------------------------------------------------------------------------------ */

struct TlsCtx {
    SSL_CTX *ctx;
};

struct TlsConn {
    SSL *ssl;
};

static const char *ssl_error(void)
{
    static __thread char buf[256];
    unsigned long e = ERR_get_error();
    if (!e)
        return "unknown error";
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return buf;
}

int crypto_tls_ctx_new(const char *cert_file, const char *key_file, TlsCtx **out, WError *err)
{
    *out = NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return werr(err, SQLSTATE_IO_ERROR, 0, "TLS: %s", ssl_error());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        werr(err, SQLSTATE_IO_ERROR, 0, "could not load TLS certificate \"%s\": %s", cert_file, ssl_error());
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        werr(err, SQLSTATE_IO_ERROR, 0, "could not load TLS private key \"%s\": %s", key_file, ssl_error());
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        werr(err, SQLSTATE_IO_ERROR, 0, "TLS private key \"%s\" does not match certificate \"%s\"", key_file,
             cert_file);
        SSL_CTX_free(ctx);
        return -1;
    }
    TlsCtx *t = xcalloc(1, sizeof *t);
    t->ctx = ctx;
    *out = t;
    return 0;
}

void crypto_tls_ctx_free(TlsCtx *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

TlsConn *crypto_tls_accept(TlsCtx *t, int fd, WError *err)
{
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl || SSL_set_fd(ssl, fd) != 1) {
        werr(err, SQLSTATE_INTERNAL, 0, "TLS: %s", ssl_error());
        SSL_free(ssl);
        return NULL;
    }
    ERR_clear_error();
    if (SSL_accept(ssl) != 1) {
        werr(err, SQLSTATE_PROTOCOL_VIOLATION, 0, "TLS handshake failed: %s", ssl_error());
        SSL_free(ssl);
        return NULL;
    }
    TlsConn *c = xcalloc(1, sizeof *c);
    c->ssl = ssl;
    return c;
}

ssize_t crypto_tls_read(TlsConn *c, void *buf, size_t n)
{
    size_t got = 0;
    ERR_clear_error();
    int rc = SSL_read_ex(c->ssl, buf, n, &got);
    if (rc == 1)
        return (ssize_t)got;
    int e = SSL_get_error(c->ssl, rc);
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    if (e == SSL_ERROR_SYSCALL && errno == 0)
        return 0;   /* EOF without close_notify: treat as an end */
    if (e != SSL_ERROR_SYSCALL && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        errno = EPROTO;   /* a TLS failure: never mistaken for EINTR by a caller's retry loop */
    return -1;
}

ssize_t crypto_tls_write(TlsConn *c, const void *buf, size_t n)
{
    size_t put = 0;
    ERR_clear_error();
    int rc = SSL_write_ex(c->ssl, buf, n, &put);
    if (rc == 1)
        return (ssize_t)put;
    int e = SSL_get_error(c->ssl, rc);
    ERR_clear_error();
    if (e != SSL_ERROR_SYSCALL && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        errno = EPROTO;
    return -1;
}

bool crypto_tls_pending(TlsConn *c) { return SSL_pending(c->ssl) > 0; }

void crypto_tls_close(TlsConn *c)
{
    if (!c)
        return;
    ERR_clear_error();
    SSL_shutdown(c->ssl);
    ERR_clear_error();
    SSL_free(c->ssl);
    free(c);
}

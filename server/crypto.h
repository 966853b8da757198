/*
 * crypto.h: SCRAM-SHA-256 (RFC 5802, RFC 7677, as PostgreSQL speaks it) and
 * TLS for the wire protocol. crypto.c is the only file that includes
 * OpenSSL; every primitive (PBKDF2, HMAC, SHA-256, random bytes, TLS) is
 * OpenSSL's, none is written here.
 */
#ifndef WEIR_SERVER_CRYPTO_H
#define WEIR_SERVER_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "error.h"

#define SCRAM_ITERATIONS 4096
#define SCRAM_VERIFIER_MAX 256   /* "SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>" fits */

/* Makes the verifier Postgres stores for password (random 16-byte salt,
 * SCRAM_ITERATIONS rounds): "SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>"
 * in base64. The password is used as given (no SASLprep): ASCII passwords
 * behave as in Postgres. Returns 0, or -1 with err (XX000). */
int crypto_scram_verifier(const char *password, char *out, size_t n, WError *err);

/* True when s is a well-formed SCRAM-SHA-256 verifier (what psql's
 * \password sends, and what weir stores). */
bool crypto_scram_is_verifier(const char *s);

/* One server side of a SCRAM-SHA-256 exchange. */
typedef struct ScramServer ScramServer;

/* verifier: the user's, or NULL when the user is unknown or has no
 * password: the exchange then runs with made-up values (derived from the
 * user name, so they are the same each time) and fails at the end, so a
 * client cannot tell unknown users from wrong passwords. */
ScramServer *crypto_scram_new(const char *verifier, const char *user);
void crypto_scram_free(ScramServer *s);

/* client-first-message in, server-first-message out (appended to out).
 * Returns 0, or -1 with err: 08P01 malformed, 0A000 channel binding asked
 * for (weir offers SCRAM-SHA-256 only), 28000 an authorization identity. */
int crypto_scram_first(ScramServer *s, const char *msg, size_t len, Buf *out, WError *err);

/* client-final-message in; on success the server-final-message ("v=...")
 * is appended to out. Returns 1 when the proof is right, 0 when it is wrong
 * (or the user unknown), -1 with err (08P01) when the message is malformed. */
int crypto_scram_final(ScramServer *s, const char *msg, size_t len, Buf *out, WError *err);

/* TLS: one context per server (certificate and key), one TlsConn per client. */
typedef struct TlsCtx TlsCtx;
typedef struct TlsConn TlsConn;

/* Loads a PEM certificate (chain) and private key. Returns 0, or -1 with
 * err (58030: unreadable file, key not matching the certificate). */
int crypto_tls_ctx_new(const char *cert_file, const char *key_file, TlsCtx **out, WError *err);
void crypto_tls_ctx_free(TlsCtx *ctx);

/* Runs the server handshake on fd (blocking; the socket's timeouts apply).
 * Returns the connection, or NULL with err (08P01) when the peer is not
 * speaking TLS, fails the handshake, or goes away. */
TlsConn *crypto_tls_accept(TlsCtx *ctx, int fd, WError *err);

/* Like recv/send on the TLS stream: bytes moved, 0 at an orderly end (read),
 * -1 on error or timeout. */
ssize_t crypto_tls_read(TlsConn *c, void *buf, size_t n);
ssize_t crypto_tls_write(TlsConn *c, const void *buf, size_t n);

/* True when decrypted bytes are already buffered (a poll on the socket
 * would not see them). */
bool crypto_tls_pending(TlsConn *c);

/* Sends close_notify (best effort) and frees c. NULL is allowed. */
void crypto_tls_close(TlsConn *c);

#endif

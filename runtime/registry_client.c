/*
 * registry_client.c: HTTP GET against a Confluent-compatible schema
 * registry, with libcurl (<curl/curl.h> is included here only).
 *
 * The Avro decoder (avro.c) asks for /schemas/ids/{id} when a record names a
 * schema id it has not seen, and CREATE SOURCE without a column list asks
 * for /subjects/{topic}-value/versions/latest. Both run on the thread that
 * steps the view or runs the statement, so every call is bounded: a 2 s
 * connect timeout, a 5 s total timeout, and a body of at most
 * WEIR_MAX_AVRO_SCHEMA_BYTES (checked as it arrives, before it grows). A
 * transport failure (refused, timed out, reset) or a 5xx answer is
 * RT_AVRO_UNAVAILABLE, which the source treats as "pause and retry", never
 * as a bad record.
 */
#include "avro_codec.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "log.h"
#include "weir_limits.h"

#define CONNECT_TIMEOUT_MS 2000
#define TOTAL_TIMEOUT_MS 5000

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct Sink {
    Buf *body;
    bool too_big;
} Sink;

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
    Sink *s = arg;
    size_t n = size * nmemb;
    if (s->body->len + n > WEIR_MAX_AVRO_SCHEMA_BYTES + 4096) { /* the schema plus its JSON wrapping */
        s->too_big = true;
        return 0; /* makes curl stop with CURLE_WRITE_ERROR */
    }
    buf_append(s->body, p, n);
    return n;
}

int rt_registry_get(const RtRegistry *reg, const char *path, Buf *body, long *status, char *errbuf, size_t errlen)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *h = curl_easy_init();
    if (!h)
        return snprintf(errbuf, errlen, "could not start an HTTP client"), RT_AVRO_UNAVAILABLE;
    Buf url = BUF_INIT;
    size_t ul = strlen(reg->url);
    while (ul > 0 && reg->url[ul - 1] == '/')
        ul--;
    buf_append(&url, reg->url, ul);
    buf_puts(&url, path);
    buf_putc(&url, 0);
    Sink s = {body, false};
    buf_reset(body);
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* called from engine threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)TOTAL_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (reg->user) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERNAME, reg->user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, reg->password ? reg->password : "");
    }
    struct curl_slist *hdr = curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json, application/json");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    CURLcode rc = curl_easy_perform(h);
    int ret = 0;
    if (s.too_big) {
        snprintf(errbuf, errlen, "schema registry answer to %s is larger than %d bytes", path,
                 WEIR_MAX_AVRO_SCHEMA_BYTES);
        ret = -1;
    } else if (rc != CURLE_OK) {
        snprintf(errbuf, errlen, "schema registry %s unreachable: %s", reg->url, curl_easy_strerror(rc));
        ret = RT_AVRO_UNAVAILABLE;
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        if (*status >= 500) {
            snprintf(errbuf, errlen, "schema registry %s answered HTTP %ld", reg->url, *status);
            ret = RT_AVRO_UNAVAILABLE;
        }
    }
    buf_putc(body, 0); /* a C string for the JSON parser; len counts it */
    body->len--;
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    buf_free(&url);
    return ret;
}

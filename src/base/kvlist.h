/* kvlist.h - named numbers and strings a preconditioner adds to the report
 * (density before/after a filter, n2max, the chosen strategy, ...). The
 * report prints them in the table and carries them in CSV and JSON. */
#ifndef GS_KVLIST_H
#define GS_KVLIST_H

#define GS_MAX_KV 24
#define GS_KV_KEY_LEN 32
#define GS_KV_STR_LEN 64

typedef struct gs_kv {
    char key[GS_KV_KEY_LEN];
    int is_string;
    double num;
    char str[GS_KV_STR_LEN];
} gs_kv;

typedef struct gs_kvlist {
    int count;
    gs_kv kv[GS_MAX_KV];
} gs_kvlist;

void gs_kv_num(gs_kvlist *l, const char *key, double value);
void gs_kv_str(gs_kvlist *l, const char *key, const char *value);

#endif

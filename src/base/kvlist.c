/* kvlist.c - the report's extra key/value items (kvlist.h). */
#include "kvlist.h"

#include <stdio.h>
#include <string.h>

static gs_kv *kv_slot(gs_kvlist *l, const char *key)
{
    for (int i = 0; i < l->count; i++)
        if (strcmp(l->kv[i].key, key) == 0) return &l->kv[i];
    if (l->count == GS_MAX_KV) return NULL;
    gs_kv *kv = &l->kv[l->count++];
    memset(kv, 0, sizeof *kv);
    snprintf(kv->key, sizeof kv->key, "%s", key);
    return kv;
}

void gs_kv_num(gs_kvlist *l, const char *key, double value)
{
    gs_kv *kv = kv_slot(l, key);
    if (!kv) return;
    kv->is_string = 0;
    kv->num = value;
}

void gs_kv_str(gs_kvlist *l, const char *key, const char *value)
{
    gs_kv *kv = kv_slot(l, key);
    if (!kv) return;
    kv->is_string = 1;
    snprintf(kv->str, sizeof kv->str, "%s", value);
}

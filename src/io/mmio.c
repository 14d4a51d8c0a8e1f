/* mmio.c - Matrix Market reader and writer, plain or gzip-compressed.
 * Reference: NIST Matrix Market exchange format, math.nist.gov/MatrixMarket/formats.html. */
#include "mmio.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- messages ----
 * Every content error reads "FILE:LINE: what", like a compiler's, so editors
 * jump to it; I/O errors read "FILE: what: strerror". */

#if defined(__GNUC__)
static int mm_fail(gs_error *err, gs_status status, const char *path, int64_t line,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#endif
static int mm_fail(gs_error *err, gs_status status, const char *path, int64_t line,
                   const char *fmt, ...)
{
    char what[GS_ERROR_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return gs_error_set(err, status, "%s:%" PRId64 ": %s", path, line, what);
}

/* A token of the file as it may be shown in a message: at most 40 bytes,
 * unprintable bytes replaced, so a binary file cannot garble a terminal. */
typedef struct mm_shown { char s[48]; } mm_shown;

static mm_shown mm_show(const char *p, const char *end)
{
    mm_shown out;
    size_t n = 0;
    for (; p < end && n < 40; p++) out.s[n++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    if (p < end) { memcpy(out.s + n, "...", 3); n += 3; }
    out.s[n] = '\0';
    return out;
}

/* ---- reading the file ---- */

enum { MM_PAD = 40 }; /* zero bytes after the text: the terminator and room for wide loads */

typedef struct mm_text {
    char *data; /* the whole file, NUL-terminated */
    size_t len;
} mm_text;

/* zlib names a stream opened with gzdopen "<fd:3>" and puts that name in
 * front of its messages; the user knows the file by its path, so drop it. */
static const char *mm_gz_message(gzFile gz, int *errnum)
{
    const char *msg = gzerror(gz, errnum);
    if (*errnum == Z_ERRNO) return strerror(errno);
    if (strncmp(msg, "<fd:", 4) == 0) {
        const char *rest = strstr(msg, ">: ");
        if (rest) msg = rest + 3;
    }
    return msg;
}

static int mm_gz_error(gzFile gz, const char *path, const char *verb, gs_error *err)
{
    int errnum = Z_OK;
    const char *msg = mm_gz_message(gz, &errnum);
    if (errnum == Z_ERRNO) return gs_error_set(err, GS_ERR_IO, "%s: cannot %s: %s", path, verb, msg);
    if (errnum == Z_MEM_ERROR)
        return gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory decompressing the file", path);
    return gs_error_set(err, GS_ERR_IO, "%s: cannot %s: corrupt or truncated gzip data (zlib: %s)",
                        path, verb, msg);
}

/* Grow the buffer to hold at least `need` more bytes plus the terminator. */
static int mm_text_reserve(mm_text *t, size_t *cap, size_t need, gs_error *err)
{
    if (*cap - t->len > need) return GS_OK;
    size_t grown = *cap * 2 > t->len + need + 1 ? *cap * 2 : t->len + need + 1;
    char *p = gs_realloc(t->data, grown, "file contents", err);
    if (!p) return GS_ERR_NOMEM;
    t->data = p;
    *cap = grown;
    return GS_OK;
}

/* The whole file in memory. zlib inflates a file that starts with the gzip
 * magic bytes 1f 8b and copies any other file through unchanged (gzread's
 * "transparent" mode, which reads straight into our buffer), so one loop
 * reads both, and a .gz file is recognised by content, not by name. */
static int mm_load(const char *path, mm_text *t, gs_error *err)
{
    enum { CHUNK = 1 << 26, SLACK = 1 << 16 }; /* SLACK > MM_PAD */
    int status = GS_OK;
    gzFile gz = NULL;
    struct stat st;
    size_t cap = 0;
    t->data = NULL;
    t->len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return gs_error_set(err, GS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int known = fstat(fd, &st) == 0, regular = known && S_ISREG(st.st_mode);
    if (known && S_ISDIR(st.st_mode)) {
        close(fd);
        return gs_error_set(err, GS_ERR_IO, "%s: cannot read: %s", path, strerror(EISDIR));
    }
    gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory opening the file", path);
    }
    gzbuffer(gz, 1 << 17);
    cap = regular ? (size_t)st.st_size + SLACK : (size_t)1 << 20;
    if (!gzdirect(gz)) cap *= 4; /* compressed: a first guess, grown below */
    t->data = gs_malloc(cap, "file contents", err);
    if (!t->data) GS_TRY(GS_ERR_NOMEM);
    for (;;) {
        GS_TRY(mm_text_reserve(t, &cap, SLACK, err));
        size_t room = cap - t->len - 1;
        int got = gzread(gz, t->data + t->len, (unsigned)(room < CHUNK ? room : CHUNK));
        if (got < 0) GS_TRY(mm_gz_error(gz, path, "read", err));
        if (got == 0) break;
        t->len += (size_t)got;
    }
    int errnum = Z_OK;
    gzerror(gz, &errnum);
    if (errnum != Z_OK) GS_TRY(mm_gz_error(gz, path, "read", err)); /* truncated gzip */
    memset(t->data + t->len, 0, MM_PAD);
cleanup:
    if (gz) gzclose_r(gz);
    if (status != GS_OK) {
        free(t->data);
        t->data = NULL;
    }
    return status;
}

/* ---- lines and tokens ---- */

static inline int mm_is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static inline const char *mm_skip_blank(const char *p, const char *end)
{
    while (p < end && mm_is_blank(*p)) p++;
    return p;
}

static inline const char *mm_token_end(const char *p, const char *end)
{
    while (p < end && !mm_is_blank(*p)) p++;
    return p;
}

static inline const char *mm_eol(const char *p, const char *end)
{
    const char *e = memchr(p, '\n', (size_t)(end - p));
    return e ? e : end;
}

/* An entry line is neither blank nor a `%` comment (leading blanks allowed). */
static inline int mm_is_entry(const char *p, const char *eol)
{
    p = mm_skip_blank(p, eol);
    return p < eol && *p != '%';
}

typedef struct mm_token {
    const char *s, *e;
} mm_token;

/* Split a line into at most max tokens; returns how many there are in all. */
static int mm_split(const char *p, const char *eol, mm_token *tok, int max)
{
    int n = 0;
    for (p = mm_skip_blank(p, eol); p < eol; p = mm_skip_blank(p, eol)) {
        const char *e = mm_token_end(p, eol);
        if (n < max) tok[n] = (mm_token){p, e};
        n++;
        p = e;
    }
    return n;
}

static int mm_token_is(mm_token t, const char *word) /* ASCII, case-insensitive */
{
    size_t n = strlen(word);
    if ((size_t)(t.e - t.s) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = t.s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        char w = word[i];
        if (w >= 'A' && w <= 'Z') w = (char)(w - 'A' + 'a');
        if (c != w) return 0;
    }
    return 1;
}

/* ---- numbers ---- */

static const double mm_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int mm_is_digit(char c) { return (unsigned)(c - '0') < 10u; }

/* 10^q as a 128-bit significand with its top bit set, truncated, {high, low},
 * for q = MM_POW10_MIN..MM_POW10_MAX: the table of Go's strconv and of
 * Lemire's fast_double_parser, cut to |q| <= 100. Generated with exact
 * integers: q >= 0: 10^q shifted to 128 bits; q < 0: floor(2^(128 + b) /
 * 10^-q), b the bit length of 10^-q, shifted to 128 bits. */
enum { MM_POW10_MIN = -100, MM_POW10_MAX = 100 };
static const uint64_t mm_pow10_128[MM_POW10_MAX - MM_POW10_MIN + 1][2] = {
    {0xDFF9772470297EBDULL, 0x59787E2B93BC56F7ULL}, {0x8BFBEA76C619EF36ULL, 0x57EB4EDB3C55B65AULL},
    {0xAEFAE51477A06B03ULL, 0xEDE622920B6B23F1ULL}, {0xDAB99E59958885C4ULL, 0xE95FAB368E45ECEDULL},
    {0x88B402F7FD75539BULL, 0x11DBCB0218EBB414ULL}, {0xAAE103B5FCD2A881ULL, 0xD652BDC29F26A119ULL},
    {0xD59944A37C0752A2ULL, 0x4BE76D3346F0495FULL}, {0x857FCAE62D8493A5ULL, 0x6F70A4400C562DDBULL},
    {0xA6DFBD9FB8E5B88EULL, 0xCB4CCD500F6BB952ULL}, {0xD097AD07A71F26B2ULL, 0x7E2000A41346A7A7ULL},
    {0x825ECC24C873782FULL, 0x8ED400668C0C28C8ULL}, {0xA2F67F2DFA90563BULL, 0x728900802F0F32FAULL},
    {0xCBB41EF979346BCAULL, 0x4F2B40A03AD2FFB9ULL}, {0xFEA126B7D78186BCULL, 0xE2F610C84987BFA8ULL},
    {0x9F24B832E6B0F436ULL, 0x0DD9CA7D2DF4D7C9ULL}, {0xC6EDE63FA05D3143ULL, 0x91503D1C79720DBBULL},
    {0xF8A95FCF88747D94ULL, 0x75A44C6397CE912AULL}, {0x9B69DBE1B548CE7CULL, 0xC986AFBE3EE11ABAULL},
    {0xC24452DA229B021BULL, 0xFBE85BADCE996168ULL}, {0xF2D56790AB41C2A2ULL, 0xFAE27299423FB9C3ULL},
    {0x97C560BA6B0919A5ULL, 0xDCCD879FC967D41AULL}, {0xBDB6B8E905CB600FULL, 0x5400E987BBC1C920ULL},
    {0xED246723473E3813ULL, 0x290123E9AAB23B68ULL}, {0x9436C0760C86E30BULL, 0xF9A0B6720AAF6521ULL},
    {0xB94470938FA89BCEULL, 0xF808E40E8D5B3E69ULL}, {0xE7958CB87392C2C2ULL, 0xB60B1D1230B20E04ULL},
    {0x90BD77F3483BB9B9ULL, 0xB1C6F22B5E6F48C2ULL}, {0xB4ECD5F01A4AA828ULL, 0x1E38AEB6360B1AF3ULL},
    {0xE2280B6C20DD5232ULL, 0x25C6DA63C38DE1B0ULL}, {0x8D590723948A535FULL, 0x579C487E5A38AD0EULL},
    {0xB0AF48EC79ACE837ULL, 0x2D835A9DF0C6D851ULL}, {0xDCDB1B2798182244ULL, 0xF8E431456CF88E65ULL},
    {0x8A08F0F8BF0F156BULL, 0x1B8E9ECB641B58FFULL}, {0xAC8B2D36EED2DAC5ULL, 0xE272467E3D222F3FULL},
    {0xD7ADF884AA879177ULL, 0x5B0ED81DCC6ABB0FULL}, {0x86CCBB52EA94BAEAULL, 0x98E947129FC2B4E9ULL},
    {0xA87FEA27A539E9A5ULL, 0x3F2398D747B36224ULL}, {0xD29FE4B18E88640EULL, 0x8EEC7F0D19A03AADULL},
    {0x83A3EEEEF9153E89ULL, 0x1953CF68300424ACULL}, {0xA48CEAAAB75A8E2BULL, 0x5FA8C3423C052DD7ULL},
    {0xCDB02555653131B6ULL, 0x3792F412CB06794DULL}, {0x808E17555F3EBF11ULL, 0xE2BBD88BBEE40BD0ULL},
    {0xA0B19D2AB70E6ED6ULL, 0x5B6ACEAEAE9D0EC4ULL}, {0xC8DE047564D20A8BULL, 0xF245825A5A445275ULL},
    {0xFB158592BE068D2EULL, 0xEED6E2F0F0D56712ULL}, {0x9CED737BB6C4183DULL, 0x55464DD69685606BULL},
    {0xC428D05AA4751E4CULL, 0xAA97E14C3C26B886ULL}, {0xF53304714D9265DFULL, 0xD53DD99F4B3066A8ULL},
    {0x993FE2C6D07B7FABULL, 0xE546A8038EFE4029ULL}, {0xBF8FDB78849A5F96ULL, 0xDE98520472BDD033ULL},
    {0xEF73D256A5C0F77CULL, 0x963E66858F6D4440ULL}, {0x95A8637627989AADULL, 0xDDE7001379A44AA8ULL},
    {0xBB127C53B17EC159ULL, 0x5560C018580D5D52ULL}, {0xE9D71B689DDE71AFULL, 0xAAB8F01E6E10B4A6ULL},
    {0x9226712162AB070DULL, 0xCAB3961304CA70E8ULL}, {0xB6B00D69BB55C8D1ULL, 0x3D607B97C5FD0D22ULL},
    {0xE45C10C42A2B3B05ULL, 0x8CB89A7DB77C506AULL}, {0x8EB98A7A9A5B04E3ULL, 0x77F3608E92ADB242ULL},
    {0xB267ED1940F1C61CULL, 0x55F038B237591ED3ULL}, {0xDF01E85F912E37A3ULL, 0x6B6C46DEC52F6688ULL},
    {0x8B61313BBABCE2C6ULL, 0x2323AC4B3B3DA015ULL}, {0xAE397D8AA96C1B77ULL, 0xABEC975E0A0D081AULL},
    {0xD9C7DCED53C72255ULL, 0x96E7BD358C904A21ULL}, {0x881CEA14545C7575ULL, 0x7E50D64177DA2E54ULL},
    {0xAA242499697392D2ULL, 0xDDE50BD1D5D0B9E9ULL}, {0xD4AD2DBFC3D07787ULL, 0x955E4EC64B44E864ULL},
    {0x84EC3C97DA624AB4ULL, 0xBD5AF13BEF0B113EULL}, {0xA6274BBDD0FADD61ULL, 0xECB1AD8AEACDD58EULL},
    {0xCFB11EAD453994BAULL, 0x67DE18EDA5814AF2ULL}, {0x81CEB32C4B43FCF4ULL, 0x80EACF948770CED7ULL},
    {0xA2425FF75E14FC31ULL, 0xA1258379A94D028DULL}, {0xCAD2F7F5359A3B3EULL, 0x096EE45813A04330ULL},
    {0xFD87B5F28300CA0DULL, 0x8BCA9D6E188853FCULL}, {0x9E74D1B791E07E48ULL, 0x775EA264CF55347DULL},
    {0xC612062576589DDAULL, 0x95364AFE032A819DULL}, {0xF79687AED3EEC551ULL, 0x3A83DDBD83F52204ULL},
    {0x9ABE14CD44753B52ULL, 0xC4926A9672793542ULL}, {0xC16D9A0095928A27ULL, 0x75B7053C0F178293ULL},
    {0xF1C90080BAF72CB1ULL, 0x5324C68B12DD6338ULL}, {0x971DA05074DA7BEEULL, 0xD3F6FC16EBCA5E03ULL},
    {0xBCE5086492111AEAULL, 0x88F4BB1CA6BCF584ULL}, {0xEC1E4A7DB69561A5ULL, 0x2B31E9E3D06C32E5ULL},
    {0x9392EE8E921D5D07ULL, 0x3AFF322E62439FCFULL}, {0xB877AA3236A4B449ULL, 0x09BEFEB9FAD487C2ULL},
    {0xE69594BEC44DE15BULL, 0x4C2EBE687989A9B3ULL}, {0x901D7CF73AB0ACD9ULL, 0x0F9D37014BF60A10ULL},
    {0xB424DC35095CD80FULL, 0x538484C19EF38C94ULL}, {0xE12E13424BB40E13ULL, 0x2865A5F206B06FB9ULL},
    {0x8CBCCC096F5088CBULL, 0xF93F87B7442E45D3ULL}, {0xAFEBFF0BCB24AAFEULL, 0xF78F69A51539D748ULL},
    {0xDBE6FECEBDEDD5BEULL, 0xB573440E5A884D1BULL}, {0x89705F4136B4A597ULL, 0x31680A88F8953030ULL},
    {0xABCC77118461CEFCULL, 0xFDC20D2B36BA7C3DULL}, {0xD6BF94D5E57A42BCULL, 0x3D32907604691B4CULL},
    {0x8637BD05AF6C69B5ULL, 0xA63F9A49C2C1B10FULL}, {0xA7C5AC471B478423ULL, 0x0FCF80DC33721D53ULL},
    {0xD1B71758E219652BULL, 0xD3C36113404EA4A8ULL}, {0x83126E978D4FDF3BULL, 0x645A1CAC083126E9ULL},
    {0xA3D70A3D70A3D70AULL, 0x3D70A3D70A3D70A3ULL}, {0xCCCCCCCCCCCCCCCCULL, 0xCCCCCCCCCCCCCCCCULL},
    {0x8000000000000000ULL, 0x0000000000000000ULL}, {0xA000000000000000ULL, 0x0000000000000000ULL},
    {0xC800000000000000ULL, 0x0000000000000000ULL}, {0xFA00000000000000ULL, 0x0000000000000000ULL},
    {0x9C40000000000000ULL, 0x0000000000000000ULL}, {0xC350000000000000ULL, 0x0000000000000000ULL},
    {0xF424000000000000ULL, 0x0000000000000000ULL}, {0x9896800000000000ULL, 0x0000000000000000ULL},
    {0xBEBC200000000000ULL, 0x0000000000000000ULL}, {0xEE6B280000000000ULL, 0x0000000000000000ULL},
    {0x9502F90000000000ULL, 0x0000000000000000ULL}, {0xBA43B74000000000ULL, 0x0000000000000000ULL},
    {0xE8D4A51000000000ULL, 0x0000000000000000ULL}, {0x9184E72A00000000ULL, 0x0000000000000000ULL},
    {0xB5E620F480000000ULL, 0x0000000000000000ULL}, {0xE35FA931A0000000ULL, 0x0000000000000000ULL},
    {0x8E1BC9BF04000000ULL, 0x0000000000000000ULL}, {0xB1A2BC2EC5000000ULL, 0x0000000000000000ULL},
    {0xDE0B6B3A76400000ULL, 0x0000000000000000ULL}, {0x8AC7230489E80000ULL, 0x0000000000000000ULL},
    {0xAD78EBC5AC620000ULL, 0x0000000000000000ULL}, {0xD8D726B7177A8000ULL, 0x0000000000000000ULL},
    {0x878678326EAC9000ULL, 0x0000000000000000ULL}, {0xA968163F0A57B400ULL, 0x0000000000000000ULL},
    {0xD3C21BCECCEDA100ULL, 0x0000000000000000ULL}, {0x84595161401484A0ULL, 0x0000000000000000ULL},
    {0xA56FA5B99019A5C8ULL, 0x0000000000000000ULL}, {0xCECB8F27F4200F3AULL, 0x0000000000000000ULL},
    {0x813F3978F8940984ULL, 0x4000000000000000ULL}, {0xA18F07D736B90BE5ULL, 0x5000000000000000ULL},
    {0xC9F2C9CD04674EDEULL, 0xA400000000000000ULL}, {0xFC6F7C4045812296ULL, 0x4D00000000000000ULL},
    {0x9DC5ADA82B70B59DULL, 0xF020000000000000ULL}, {0xC5371912364CE305ULL, 0x6C28000000000000ULL},
    {0xF684DF56C3E01BC6ULL, 0xC732000000000000ULL}, {0x9A130B963A6C115CULL, 0x3C7F400000000000ULL},
    {0xC097CE7BC90715B3ULL, 0x4B9F100000000000ULL}, {0xF0BDC21ABB48DB20ULL, 0x1E86D40000000000ULL},
    {0x96769950B50D88F4ULL, 0x1314448000000000ULL}, {0xBC143FA4E250EB31ULL, 0x17D955A000000000ULL},
    {0xEB194F8E1AE525FDULL, 0x5DCFAB0800000000ULL}, {0x92EFD1B8D0CF37BEULL, 0x5AA1CAE500000000ULL},
    {0xB7ABC627050305ADULL, 0xF14A3D9E40000000ULL}, {0xE596B7B0C643C719ULL, 0x6D9CCD05D0000000ULL},
    {0x8F7E32CE7BEA5C6FULL, 0xE4820023A2000000ULL}, {0xB35DBF821AE4F38BULL, 0xDDA2802C8A800000ULL},
    {0xE0352F62A19E306EULL, 0xD50B2037AD200000ULL}, {0x8C213D9DA502DE45ULL, 0x4526F422CC340000ULL},
    {0xAF298D050E4395D6ULL, 0x9670B12B7F410000ULL}, {0xDAF3F04651D47B4CULL, 0x3C0CDD765F114000ULL},
    {0x88D8762BF324CD0FULL, 0xA5880A69FB6AC800ULL}, {0xAB0E93B6EFEE0053ULL, 0x8EEA0D047A457A00ULL},
    {0xD5D238A4ABE98068ULL, 0x72A4904598D6D880ULL}, {0x85A36366EB71F041ULL, 0x47A6DA2B7F864750ULL},
    {0xA70C3C40A64E6C51ULL, 0x999090B65F67D924ULL}, {0xD0CF4B50CFE20765ULL, 0xFFF4B4E3F741CF6DULL},
    {0x82818F1281ED449FULL, 0xBFF8F10E7A8921A4ULL}, {0xA321F2D7226895C7ULL, 0xAFF72D52192B6A0DULL},
    {0xCBEA6F8CEB02BB39ULL, 0x9BF4F8A69F764490ULL}, {0xFEE50B7025C36A08ULL, 0x02F236D04753D5B4ULL},
    {0x9F4F2726179A2245ULL, 0x01D762422C946590ULL}, {0xC722F0EF9D80AAD6ULL, 0x424D3AD2B7B97EF5ULL},
    {0xF8EBAD2B84E0D58BULL, 0xD2E0898765A7DEB2ULL}, {0x9B934C3B330C8577ULL, 0x63CC55F49F88EB2FULL},
    {0xC2781F49FFCFA6D5ULL, 0x3CBF6B71C76B25FBULL}, {0xF316271C7FC3908AULL, 0x8BEF464E3945EF7AULL},
    {0x97EDD871CFDA3A56ULL, 0x97758BF0E3CBB5ACULL}, {0xBDE94E8E43D0C8ECULL, 0x3D52EEED1CBEA317ULL},
    {0xED63A231D4C4FB27ULL, 0x4CA7AAA863EE4BDDULL}, {0x945E455F24FB1CF8ULL, 0x8FE8CAA93E74EF6AULL},
    {0xB975D6B6EE39E436ULL, 0xB3E2FD538E122B44ULL}, {0xE7D34C64A9C85D44ULL, 0x60DBBCA87196B616ULL},
    {0x90E40FBEEA1D3A4AULL, 0xBC8955E946FE31CDULL}, {0xB51D13AEA4A488DDULL, 0x6BABAB6398BDBE41ULL},
    {0xE264589A4DCDAB14ULL, 0xC696963C7EED2DD1ULL}, {0x8D7EB76070A08AECULL, 0xFC1E1DE5CF543CA2ULL},
    {0xB0DE65388CC8ADA8ULL, 0x3B25A55F43294BCBULL}, {0xDD15FE86AFFAD912ULL, 0x49EF0EB713F39EBEULL},
    {0x8A2DBF142DFCC7ABULL, 0x6E3569326C784337ULL}, {0xACB92ED9397BF996ULL, 0x49C2C37F07965404ULL},
    {0xD7E77A8F87DAF7FBULL, 0xDC33745EC97BE906ULL}, {0x86F0AC99B4E8DAFDULL, 0x69A028BB3DED71A3ULL},
    {0xA8ACD7C0222311BCULL, 0xC40832EA0D68CE0CULL}, {0xD2D80DB02AABD62BULL, 0xF50A3FA490C30190ULL},
    {0x83C7088E1AAB65DBULL, 0x792667C6DA79E0FAULL}, {0xA4B8CAB1A1563F52ULL, 0x577001B891185938ULL},
    {0xCDE6FD5E09ABCF26ULL, 0xED4C0226B55E6F86ULL}, {0x80B05E5AC60B6178ULL, 0x544F8158315B05B4ULL},
    {0xA0DC75F1778E39D6ULL, 0x696361AE3DB1C721ULL}, {0xC913936DD571C84CULL, 0x03BC3A19CD1E38E9ULL},
    {0xFB5878494ACE3A5FULL, 0x04AB48A04065C723ULL}, {0x9D174B2DCEC0E47BULL, 0x62EB0D64283F9C76ULL},
    {0xC45D1DF942711D9AULL, 0x3BA5D0BD324F8394ULL}, {0xF5746577930D6500ULL, 0xCA8F44EC7EE36479ULL},
    {0x9968BF6ABBE85F20ULL, 0x7E998B13CF4E1ECBULL}, {0xBFC2EF456AE276E8ULL, 0x9E3FEDD8C321A67EULL},
    {0xEFB3AB16C59B14A2ULL, 0xC5CFE94EF3EA101EULL}, {0x95D04AEE3B80ECE5ULL, 0xBBA1F1D158724A12ULL},
    {0xBB445DA9CA61281FULL, 0x2A8A6E45AE8EDC97ULL}, {0xEA1575143CF97226ULL, 0xF52D09D71A3293BDULL},
    {0x924D692CA61BE758ULL, 0x593C2626705F9C56ULL},
};

/* Eisel-Lemire: w * 10^q correctly rounded from one or two 64 x 64-bit
 * products with the table above (D. Lemire, "Number parsing at a gigabyte
 * per second", Softw. Pract. Exper. 51(8), 2021; as in Go's
 * strconv.eiselLemire64). Returns 0 where it cannot decide cheaply (a
 * halfway case, a subnormal or infinite result, q beyond the table), and
 * the caller then asks strtod. Needs a 128-bit product (GCC, Clang). */
static int mm_eisel_lemire(uint64_t w, int q, int neg, double *out)
{
#if defined(__GNUC__) && defined(__SIZEOF_INT128__)
    if (w == 0 || q < MM_POW10_MIN || q > MM_POW10_MAX) return 0;
    const uint64_t *pow = mm_pow10_128[q - MM_POW10_MIN];
    int clz = __builtin_clzll(w);
    w <<= clz;
    int64_t t = 217706 * (int64_t)q; /* floor(q log2(10)) = floor(t / 2^16) */
    int64_t log2_pow = t >= 0 ? t >> 16 : -((-t + 65535) >> 16);
    uint64_t exp2 = (uint64_t)(log2_pow + 64 + 1023) - (uint64_t)clz;
    unsigned __int128 x = (unsigned __int128)w * pow[0];
    uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
    if ((hi & 0x1FF) == 0x1FF && lo + w < w) { /* near a boundary: the low half too */
        unsigned __int128 y = (unsigned __int128)w * pow[1];
        uint64_t y_hi = (uint64_t)(y >> 64), y_lo = (uint64_t)y;
        uint64_t merged_lo = lo + y_hi, merged_hi = hi + (merged_lo < lo);
        if ((merged_hi & 0x1FF) == 0x1FF && merged_lo + 1 == 0 && y_lo + w < w) return 0;
        hi = merged_hi;
        lo = merged_lo;
    }
    uint64_t msb = hi >> 63, mantissa = hi >> (msb + 9); /* 54 bits */
    exp2 -= 1 ^ msb;
    if (lo == 0 && (hi & 0x1FF) == 0 && (mantissa & 3) == 1) return 0; /* halfway */
    mantissa += mantissa & 1; /* round to 53 bits */
    mantissa >>= 1;
    if (mantissa >> 53) {
        mantissa >>= 1;
        exp2++;
    }
    if (exp2 - 1 >= 0x7FF - 1) return 0; /* subnormal or infinite */
    uint64_t bits = exp2 << 52 | (mantissa & 0x000FFFFFFFFFFFFFull) | (uint64_t)neg << 63;
    memcpy(out, &bits, sizeof bits);
    return 1;
#else
    (void)w, (void)q, (void)neg, (void)out;
    return 0;
#endif
}

/* The fast path below scans with sentinels instead of bounds: every line of
 * a chunk ends in '\n' except the file's last, which ends at the NUL that
 * mm_load puts after the text. */
static inline int mm_is_end(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\0';
}

/* Eight ASCII digits at once (SWAR, as in simdjson and fast_float): the
 * test checks that every byte is 0x30..0x39, the products fold pairs,
 * quads, octets. Loads may look up to 8 bytes past the end of the text:
 * mm_load pads it with zeros. (Branch-free digit runs of any length were
 * tried: more instructions per line, slower on real matrices.) */
static inline int mm_eight_digits(uint64_t x)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    (void)x;
    return 0; /* the folding below assumes little-endian loads */
#endif
    return (((x & 0xF0F0F0F0F0F0F0F0ull) |
             (((x + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) ==
            0x3333333333333333ull);
}

static inline uint64_t mm_eight_value(uint64_t x) /* "d0d1..d7", first digit lowest */
{
    x = (x & 0x0F0F0F0F0F0F0F0Full) * 2561 >> 8;
    x = (x & 0x00FF00FF00FF00FFull) * 6553601 >> 16;
    return (x & 0x0000FFFF0000FFFFull) * 42949672960001ull >> 32;
}

static inline const char *mm_fast_digits(const char *p, uint64_t *m)
{
    uint64_t x;
    memcpy(&x, p, 8);
    while (mm_eight_digits(x)) { /* m wraps beyond 19 digits: the caller refuses those */
        *m = *m * 100000000u + mm_eight_value(x);
        p += 8;
        memcpy(&x, p, 8);
    }
    while (mm_is_digit(*p)) *m = *m * 10 + (uint64_t)(*p++ - '0');
    return p;
}

/* Clinger's fast path: a decimal m * 10^e with m <= 2^53 and |e| <= 22 is
 * one IEEE multiplication or division of two exact doubles, correctly
 * rounded, hence bit for bit what a correctly rounding strtod returns. The
 * token [+-]d*[.d*][e[+-]d+] (integer field: [+-]d+) must end at a blank,
 * '\n' or NUL. Other values of at most 19 significant digits go to
 * Eisel-Lemire. Returns the end of the token, or NULL for anything else (more
 * digits, exponents beyond 1e+-100, nan, hex, malformed): strtod's job. */
static inline const char *mm_fast_value(const char *p, int integer, double *out)
{
    while (*p == ' ' || *p == '\t') p++;
    int neg = *p == '-', e10 = 0;
    p += *p == '-' || *p == '+';
    const char *s = p;
    uint64_t m = 0;
    while (*p == '0') p++; /* leading zeros are not significant digits */
    const char *d = p;
    p = mm_fast_digits(p, &m);
    int64_t nd = p - d, any = p > s;
    if (*p == '.' && !integer) {
        const char *f = ++p;
        if (m == 0)
            while (*p == '0') p++;
        const char *g = p;
        p = mm_fast_digits(p, &m);
        nd += p - g;
        e10 = (int)-(p - f);
        any |= p > f;
    }
    if (!any || nd > 19 || p - s > 4000) return NULL; /* 4000: e10 stays an int */
    if ((*p == 'e' || *p == 'E') && !integer) {
        int eneg = *++p == '-', x = 0;
        p += *p == '-' || *p == '+';
        const char *x0 = p;
        while (mm_is_digit(*p) && p - x0 < 6) x = x * 10 + (*p++ - '0');
        if (p == x0) return NULL;
        e10 += eneg ? -x : x;
    }
    if (!mm_is_end(*p)) return NULL;
    if (m != 0 && (m > (1ull << 53) || e10 < -22 || e10 > 22)) /* beyond Clinger */
        return mm_eisel_lemire(m, e10, neg, out) ? p : NULL;
    double v = m == 0 ? 0.0 : e10 < 0 ? (double)m / mm_pow10[-e10] : (double)m * mm_pow10[e10];
    *out = neg ? -v : v;
    return p;
}

static inline const char *mm_fast_index(const char *p, uint64_t *out) /* 1..10 digits */
{
    while (*p == ' ' || *p == '\t') p++;
    const char *s = p;
    uint64_t v = 0;
    while (mm_is_digit(*p)) v = v * 10 + (uint64_t)(*p++ - '0');
    if (p == s || p - s > 10 || !mm_is_end(*p)) return NULL;
    *out = v;
    return p;
}

/* A nonzero decimal whose double is 0 or subnormal: strtod's underflow.
 * Such a value would silently become 0, or a number with fewer than 53
 * significant bits that GPU kernels may flush to 0, so the file is refused
 * instead; every normal magnitude (1e-300 too) is kept exactly. */
static int mm_underflows(double x, const char *t, const char *te)
{
    if (fpclassify(x) == FP_SUBNORMAL) return 1;
    if (x != 0.0) return 0;
    for (const char *p = t; p < te && *p != 'e' && *p != 'E'; p++)
        if (*p >= '1' && *p <= '9') return 1; /* a nonzero significand read as 0 */
    return 0;
}

/* The rest of the value grammar, with strtod as the exact converter. Only
 * decimal numbers are accepted: strtod would also take hex floats, and
 * "nan"/"inf", which have no place in a matrix we can solve with. */
static int mm_slow_value(const char *path, int64_t line, int field, const char *t,
                         const char *te, double *v, gs_error *err)
{
    if (t == te) return mm_fail(err, GS_ERR_INPUT, path, line, "missing value");
    int decimal = 1, integer = 1;
    for (const char *p = t; p < te; p++) {
        int sign = (*p == '-' || *p == '+') && (p == t || p[-1] == 'e' || p[-1] == 'E');
        decimal &= mm_is_digit(*p) || sign || *p == '.' || *p == 'e' || *p == 'E';
        integer &= mm_is_digit(*p) || (sign && p == t);
    }
    char *end = NULL;
    double x = strtod(t, &end);
    if (end != te || !decimal) {
        if (end == te && !isfinite(x))
            return mm_fail(err, GS_ERR_INPUT, path, line, "value '%s' is not a finite number",
                           mm_show(t, te).s);
        return mm_fail(err, GS_ERR_INPUT, path, line, "value '%s' is not a number",
                       mm_show(t, te).s);
    }
    if (!isfinite(x))
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "value '%s' is not a finite number (overflows a double)",
                       mm_show(t, te).s);
    if (mm_underflows(x, t, te))
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "value '%s' underflows: nonzero but below the smallest normal double "
                       "(%.17g)", mm_show(t, te).s, DBL_MIN);
    if (field == GS_MM_INTEGER && !integer)
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "value '%s' is not an integer (the banner says integer)",
                       mm_show(t, te).s);
    *v = x;
    return GS_OK;
}

static inline int mm_read_value(const char *path, int64_t line, int field, const char **pp,
                                const char *eol, double *v, gs_error *err)
{
    const char *t = mm_skip_blank(*pp, eol), *te = mm_token_end(t, eol);
    *pp = te;
    if (mm_fast_value(t, field == GS_MM_INTEGER, v) == te) return GS_OK;
    return mm_slow_value(path, line, field, t, te, v, err);
}

/* A non-negative decimal count: 0 ok, -1 negative, -2 not an integer,
 * -3 beyond 2^62 (so products of two counts below 2^31 never overflow). */
static int mm_parse_count(const char *p, const char *te, int64_t *out)
{
    int neg = 0;
    int64_t v = 0;
    if (p < te && (*p == '-' || *p == '+')) neg = *p++ == '-';
    if (p == te) return -2;
    for (; p < te; p++) {
        if (!mm_is_digit(*p)) return -2;
        if (v > ((int64_t)1 << 62) / 10) return neg ? -1 : -3;
        v = v * 10 + (*p - '0');
    }
    if (neg && v != 0) return -1;
    *out = v;
    return 0;
}

/* Indices the fast path below does not take: leading zeros or a sign
 * ("+7", "007" are fine), and every kind of bad index, each with its message. */
static int mm_read_index_slow(const char *path, int64_t line, const char *what, int64_t bound,
                              const char *t, const char *eol, int32_t *out, gs_error *err)
{
    const char *te = mm_token_end(t, eol);
    int64_t v = 0;
    int rc = mm_parse_count(t, te, &v);
    if (t == te) return mm_fail(err, GS_ERR_INPUT, path, line, "missing %s index", what);
    if (rc == -2)
        return mm_fail(err, GS_ERR_INPUT, path, line, "%s index '%s' is not an integer", what,
                       mm_show(t, te).s);
    if (rc == 0 && v >= 1 && v <= bound) {
        *out = (int32_t)(v - 1);
        return GS_OK;
    }
    return mm_fail(err, GS_ERR_INPUT, path, line, "%s index %s out of range 1..%" PRId64 "%s",
                   what, mm_show(t, te).s, bound,
                   rc == 0 && v == 0 ? " (Matrix Market indices are 1-based)" : "");
}

/* Read a 1-based index in 1..bound and return it 0-based. */
static inline int mm_read_index(const char *path, int64_t line, const char *what,
                                int64_t bound, const char **pp, const char *eol, int32_t *out,
                                gs_error *err)
{
    const char *t = mm_skip_blank(*pp, eol), *p = t;
    uint64_t v = 0;
    while (p < eol && mm_is_digit(*p) && p - t < 11) v = v * 10 + (uint64_t)(*p++ - '0');
    if (p > t && (p == eol || mm_is_blank(*p)) && v >= 1 && v <= (uint64_t)bound) {
        *out = (int32_t)(v - 1);
        *pp = p;
        return GS_OK;
    }
    *pp = mm_token_end(t, eol);
    return mm_read_index_slow(path, line, what, bound, t, eol, out, err);
}

/* ---- banner and size line ---- */

enum { MM_FOR_MATRIX, MM_FOR_VECTOR };

typedef struct mm_header {
    gs_mm_info info;
    int64_t expected;  /* entry lines that must follow: nnz, or rows*cols for array */
    size_t body;       /* offset of the first line after the size line */
    int64_t body_line; /* its line number */
} mm_header;

/* Which banner words we know, and the combinations NIST's mm_is_valid() bans. */
static int mm_banner_words(const char *path, const mm_token *tok, gs_mm_info *info,
                           gs_error *err)
{
    if (!mm_token_is(tok[1], "matrix"))
        return mm_fail(err, GS_ERR_INPUT, path, 1, "unsupported object '%s' (expected matrix)",
                       mm_show(tok[1].s, tok[1].e).s);
    if (mm_token_is(tok[2], "coordinate")) info->is_array = 0;
    else if (mm_token_is(tok[2], "array")) info->is_array = 1;
    else return mm_fail(err, GS_ERR_INPUT, path, 1,
                        "unknown format '%s' (expected coordinate or array)",
                        mm_show(tok[2].s, tok[2].e).s);
    if (mm_token_is(tok[3], "real")) info->field = GS_MM_REAL;
    else if (mm_token_is(tok[3], "integer")) info->field = GS_MM_INTEGER;
    else if (mm_token_is(tok[3], "pattern")) info->field = GS_MM_PATTERN;
    else if (mm_token_is(tok[3], "complex"))
        return mm_fail(err, GS_ERR_INPUT, path, 1,
                       "complex matrices are not supported (gpusolve solves real systems)");
    else return mm_fail(err, GS_ERR_INPUT, path, 1,
                        "unknown field '%s' (expected real, integer or pattern)",
                        mm_show(tok[3].s, tok[3].e).s);
    if (mm_token_is(tok[4], "general")) info->symmetry = GS_MM_GENERAL;
    else if (mm_token_is(tok[4], "symmetric")) info->symmetry = GS_MM_SYMMETRIC;
    else if (mm_token_is(tok[4], "skew-symmetric")) info->symmetry = GS_MM_SKEW_SYMMETRIC;
    else if (mm_token_is(tok[4], "hermitian"))
        return mm_fail(err, GS_ERR_INPUT, path, 1,
                       "hermitian matrices are not supported (gpusolve solves real systems)");
    else return mm_fail(err, GS_ERR_INPUT, path, 1,
                        "unknown symmetry '%s' (expected general, symmetric or skew-symmetric)",
                        mm_show(tok[4].s, tok[4].e).s);
    if (info->field == GS_MM_PATTERN && info->symmetry == GS_MM_SKEW_SYMMETRIC)
        return mm_fail(err, GS_ERR_INPUT, path, 1,
                       "a pattern matrix cannot be skew-symmetric (it has no signs to negate)");
    if (info->field == GS_MM_PATTERN && info->is_array)
        return mm_fail(err, GS_ERR_INPUT, path, 1, "an array matrix cannot be a pattern");
    return GS_OK;
}

static int mm_parse_banner(const char *path, const char *p, const char *eol, int purpose,
                           gs_mm_info *info, gs_error *err)
{
    mm_token tok[6];
    if (eol - p >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3; /* UTF-8 byte order mark */
    int n = mm_split(p, eol, tok, 6);
    if (n == 0 || !mm_token_is(tok[0], "%%MatrixMarket"))
        return mm_fail(err, GS_ERR_INPUT, path, 1,
                       "missing banner: a Matrix Market file starts with "
                       "'%%%%MatrixMarket matrix coordinate real general' or similar");
    if (n < 5)
        return mm_fail(err, GS_ERR_INPUT, path, 1,
                       "incomplete banner: expected "
                       "'%%%%MatrixMarket matrix FORMAT FIELD SYMMETRY'");
    if (n > 5)
        return mm_fail(err, GS_ERR_INPUT, path, 1, "unexpected '%s' after the banner's symmetry",
                       mm_show(tok[5].s, tok[5].e).s);
    int status = mm_banner_words(path, tok, info, err);
    if (status != GS_OK) return status;
    if (purpose == MM_FOR_MATRIX && info->is_array)
        return mm_fail(err, GS_ERR_INPUT, path, 1,
                       "dense 'array' matrices are not supported; use the coordinate format");
    if (purpose == MM_FOR_VECTOR && info->field == GS_MM_PATTERN)
        return mm_fail(err, GS_ERR_INPUT, path, 1, "a vector cannot be a pattern (no values)");
    if (purpose == MM_FOR_VECTOR && info->is_array && info->symmetry != GS_MM_GENERAL)
        return mm_fail(err, GS_ERR_INPUT, path, 1, "an array vector must be general");
    return GS_OK;
}

/* Sizes: counts below 2^31 (our indices are int32), symmetric means square,
 * and a coordinate file cannot hold more distinct entries than rows*cols. */
static int mm_check_sizes(const char *path, int64_t line, int purpose, mm_header *h,
                          gs_error *err)
{
    gs_mm_info *in = &h->info;
    const int64_t limit = INT32_MAX;
    if (in->rows > limit || in->cols > limit)
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "size %" PRId64 " x %" PRId64 " exceeds the 32-bit index limit %" PRId64,
                       in->rows, in->cols, limit);
    if (in->symmetry != GS_MM_GENERAL && in->rows != in->cols)
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "a symmetric or skew-symmetric matrix must be square, not %" PRId64
                       " x %" PRId64, in->rows, in->cols);
    if (purpose == MM_FOR_VECTOR && in->rows != 1 && in->cols != 1)
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "not a vector: %" PRId64 " x %" PRId64 " (one dimension must be 1)",
                       in->rows, in->cols);
    if (in->is_array) in->entries_stored = in->rows * in->cols;
    else if (in->entries_stored > in->rows * in->cols)
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "%" PRId64 " entries exceed rows x columns = %" PRId64,
                       in->entries_stored, in->rows * in->cols);
    h->expected = in->entries_stored;
    return GS_OK;
}

static int mm_parse_size(const char *path, int64_t line, const char *p, const char *eol,
                         int purpose, mm_header *h, gs_error *err)
{
    static const char *names[3] = {"rows", "columns", "entries"};
    mm_token tok[4];
    int64_t v[3] = {0, 0, 0};
    int want = h->info.is_array ? 2 : 3;
    int n = mm_split(p, eol, tok, 4);
    if (n != want)
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "bad size line: expected %s, found %d numbers",
                       want == 3 ? "'rows columns entries'" : "'rows columns'", n);
    for (int i = 0; i < want; i++) {
        int rc = mm_parse_count(tok[i].s, tok[i].e, &v[i]);
        if (rc != 0)
            return mm_fail(err, GS_ERR_INPUT, path, line, "bad size line: %s '%s' is %s",
                           names[i], mm_show(tok[i].s, tok[i].e).s,
                           rc == -1 ? "negative" : rc == -2 ? "not an integer" : "too large");
    }
    h->info.rows = v[0];
    h->info.cols = v[1];
    h->info.entries_stored = v[2];
    return mm_check_sizes(path, line, purpose, h, err);
}

/* Banner on line 1, then any blank or `%` lines, then the size line. */
static int mm_parse_header(const char *path, const mm_text *t, int purpose, mm_header *h,
                           gs_error *err)
{
    const char *p = t->data, *end = t->data + t->len;
    const char *eol = mm_eol(p, end);
    int64_t line = 1;
    memset(h, 0, sizeof *h);
    if (t->len == 0)
        return mm_fail(err, GS_ERR_INPUT, path, 1, "empty file (expected a %%%%MatrixMarket banner)");
    int status = mm_parse_banner(path, p, eol, purpose, &h->info, err);
    if (status != GS_OK) return status;
    for (p = eol + (eol < end), line++; p < end; p = eol + (eol < end), line++) {
        eol = mm_eol(p, end);
        if (!mm_is_entry(p, eol)) continue;
        h->body = (size_t)(eol + (eol < end) - t->data);
        h->body_line = line + 1;
        return mm_parse_size(path, line, p, eol, purpose, h, err);
    }
    return mm_fail(err, GS_ERR_INPUT, path, line - 1,
                   "premature end of file: missing the size line");
}

/* ---- entries: chunks of lines parsed in parallel ----
 * With several chunks, pass 1 counts lines and entry lines per chunk; their
 * prefix sums give each chunk its first line number and first entry index,
 * so pass 2 parses every chunk independently into its place. One chunk
 * needs no pass 1. Each chunk keeps its first error, and the first chunk
 * with an error holds the file's first error: the message is the one a
 * serial reader gives. */

typedef gs_mm_entries mm_entries;

typedef struct mm_job {
    const char *path;
    const gs_mm_info *info;
    int64_t expected; /* entries the size line announced */
    int64_t limit;    /* entry index bound of out: min(expected, entries the text can hold) */
    int64_t base;     /* entry k is stored at out[k - base] (a part of the file: its first) */
    mm_entries *out;
} mm_job;

typedef struct mm_chunk {
    const char *begin, *end;         /* whole lines */
    int64_t lines, entries;          /* pass 1: '\n' count, entry lines */
    int64_t first_line, first_entry; /* exclusive prefix sums */
    int64_t parsed;                  /* pass 2: entries stored */
    int64_t mirrors, first_mirror;   /* symmetric storage: off-diagonal entries, their place */
    gs_error err;
} mm_chunk;

enum { MM_CHUNK_MIN_BYTES = 1 << 18, MM_CHUNKS_PER_THREAD = 4, MM_CHUNKS_MAX = 4096 };
enum { MM_PARALLEL_MIN = 1 << 16 }; /* entries below which a loop is not worth threads */

/* The careful parse of one entry line, with a message for every fault. */
static int mm_parse_line(const mm_job *job, const char *p, const char *eol, int64_t k,
                         int64_t line, gs_error *err)
{
    const gs_mm_info *in = job->info;
    const char *path = job->path;
    int32_t i = 0, j = 0;
    double v = 1.0;
    int status = GS_OK;
    if (!in->is_array) {
        GS_TRY(mm_read_index(path, line, "row", in->rows, &p, eol, &i, err));
        GS_TRY(mm_read_index(path, line, "column", in->cols, &p, eol, &j, err));
    }
    if (in->field != GS_MM_PATTERN)
        GS_TRY(mm_read_value(path, line, (int)in->field, &p, eol, &v, err));
    p = mm_skip_blank(p, eol);
    if (p < eol)
        return mm_fail(err, GS_ERR_INPUT, path, line, "too many tokens: '%s' after %s",
                       mm_show(p, mm_token_end(p, eol)).s,
                       in->is_array ? "the value"
                       : in->field == GS_MM_PATTERN ? "'row column' (a pattern entry has no value)"
                                                    : "'row column value'");
    if (in->symmetry == GS_MM_SKEW_SYMMETRIC && i == j && v != 0.0)
        return mm_fail(err, GS_ERR_INPUT, path, line,
                       "skew-symmetric matrix with a nonzero diagonal entry a(%d,%d) = %.17g",
                       (int)i + 1, (int)j + 1, v);
    if (k == job->limit) return GS_OK; /* checked, not stored: see mm_careful_line */
    if (job->out->row) {
        job->out->row[k - job->base] = i;
        job->out->col[k - job->base] = j;
    }
    if (job->out->val) job->out->val[k - job->base] = v;
cleanup:
    return status;
}

/* The common line "ROW COL VALUE\n", parsed in one scan. Returns the start
 * of the next line, or NULL when anything at all is unusual; the careful
 * path then takes the line (and gives the message if it is wrong). */
static inline const char *mm_fast_line(const mm_job *job, const char *p, const char *end,
                                       int64_t k)
{
    const gs_mm_info *in = job->info;
    uint64_t i = 1, j = 1;
    double v = 1.0;
    if (!in->is_array) {
        if (!(p = mm_fast_index(p, &i)) || i - 1 >= (uint64_t)in->rows) return NULL;
        if (!(p = mm_fast_index(p, &j)) || j - 1 >= (uint64_t)in->cols) return NULL;
    }
    if (in->field != GS_MM_PATTERN && !(p = mm_fast_value(p, in->field == GS_MM_INTEGER, &v)))
        return NULL;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (*p == '\n') p++;
    else if (p != end) return NULL;
    if (in->symmetry == GS_MM_SKEW_SYMMETRIC && i == j) return NULL;
    if (job->out->row) {
        job->out->row[k - job->base] = (int32_t)(i - 1);
        job->out->col[k - job->base] = (int32_t)(j - 1);
    }
    if (job->out->val) job->out->val[k - job->base] = v;
    return p;
}

static void mm_count_chunk(mm_chunk *c)
{
    for (const char *p = c->begin; p < c->end;) {
        const char *eol = mm_eol(p, c->end);
        c->entries += mm_is_entry(p, eol);
        if (eol == c->end) break;
        c->lines++;
        p = eol + 1;
    }
}

/* A line the fast path refused: a comment, a blank line, one entry too
 * many, or a line that may be wrong. Returns the next line or NULL on error. */
static const char *mm_careful_line(const mm_job *job, mm_chunk *c, const char *p, int64_t k,
                                   int64_t line, int *stored)
{
    const char *eol = mm_eol(p, c->end);
    *stored = 0;
    if (mm_is_entry(p, eol)) {
        if (k == job->expected) {
            mm_fail(&c->err, GS_ERR_INPUT, job->path, line,
                    "too many entries: the size line announced %" PRId64, job->expected);
            return NULL;
        }
        if (mm_parse_line(job, p, eol, k, line, &c->err) != GS_OK) return NULL;
        if (k == job->limit) { /* mm_max_entries says a valid line cannot be here */
            gs_error_set(&c->err, GS_ERR_INTERNAL, "%s: entry bound exceeded", job->path);
            return NULL;
        }
        *stored = 1;
    }
    return eol + (eol < c->end);
}

static void mm_parse_chunk(const mm_job *job, mm_chunk *c)
{
    int64_t line = c->first_line, k = c->first_entry;
    if (k > job->expected) return; /* an earlier chunk reports "too many" */
    for (const char *p = c->begin; p < c->end; line++) {
        const char *next = k < job->limit ? mm_fast_line(job, p, c->end, k) : NULL;
        int stored = 1;
        if (!next && !(next = mm_careful_line(job, c, p, k, line, &stored))) break;
        k += stored;
        p = next;
    }
    c->parsed = k - c->first_entry;
}

/* Cut [begin, end) into chunks of whole lines. */
static int mm_make_chunks(const char *begin, const char *end, int64_t first_line,
                          mm_chunk **chunks, int *count, gs_error *err)
{
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    size_t bytes = (size_t)(end - begin);
    size_t n = bytes / MM_CHUNK_MIN_BYTES + 1, most = (size_t)threads * MM_CHUNKS_PER_THREAD;
    if (threads == 1) most = 1;
    if (n > most) n = most;
    if (n > MM_CHUNKS_MAX) n = MM_CHUNKS_MAX;
    mm_chunk *c = gs_calloc(n, sizeof *c, "Matrix Market parse chunks", err);
    if (!c) return GS_ERR_NOMEM;
    const char *p = begin;
    for (size_t i = 0; i < n; i++) {
        const char *cut = i + 1 == n ? end : begin + bytes / n * (i + 1);
        if (cut < p) cut = p;
        cut = mm_eol(cut, end);
        c[i].begin = p;
        c[i].end = p = cut + (cut < end);
    }
    c[0].first_line = first_line;
    *chunks = c;
    *count = (int)n;
    return GS_OK;
}

/* Most entry lines bytes can hold: "1 1 1\n", "1 1\n" (pattern), "1\n" (array). */
static int64_t mm_max_entries(const gs_mm_info *in, size_t bytes)
{
    int64_t shortest = in->is_array ? 2 : in->field == GS_MM_PATTERN ? 4 : 6;
    return ((int64_t)bytes + 1) / shortest;
}

static int mm_alloc_entries(const gs_mm_info *in, int64_t count, int mirrors, mm_entries *e,
                            gs_error *err)
{
    /* symmetric storage expanded in place later (mirrors): room for the mirrors */
    size_t room = (size_t)count * (mirrors && in->symmetry != GS_MM_GENERAL ? 2 : 1);
    if (!in->is_array) {
        e->row = gs_malloc(room * sizeof *e->row, "row indices", err);
        if (!e->row) return GS_ERR_NOMEM;
        e->col = gs_malloc(room * sizeof *e->col, "column indices", err);
        if (!e->col) return GS_ERR_NOMEM;
    }
    if (in->field != GS_MM_PATTERN) {
        e->val = gs_malloc(room * sizeof *e->val, "values", err);
        if (!e->val) return GS_ERR_NOMEM;
    }
    return GS_OK;
}

/* The line the file ends on, for "premature end of file" (an error path). */
static int64_t mm_last_line(const mm_text *t)
{
    int64_t newlines = 0;
    for (const char *p = t->data, *end = t->data + t->len; (p = memchr(p, '\n', (size_t)(end - p))); p++)
        newlines++;
    return newlines + (t->len > 0 && t->data[t->len - 1] != '\n');
}

/* Pass 1 where there are several chunks: entry counts give each chunk its place. */
static int64_t mm_count_entries(mm_chunk *c, int n)
{
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) mm_count_chunk(&c[i]);
    for (int i = 1; i < n; i++) {
        c[i].first_line = c[i - 1].first_line + c[i - 1].lines;
        c[i].first_entry = c[i - 1].first_entry + c[i - 1].entries;
    }
    return c[n - 1].first_entry + c[n - 1].entries;
}

/* Symmetric storage holds a_ij for one triangle; add a_ji = a_ij (skew:
 * a_ji = -a_ij) behind all stored entries, chunk by chunk in parallel; the
 * diagonal is not mirrored. */
static void mm_expand_symmetric(mm_entries *e, mm_chunk *c, int n, int negate)
{
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int i = 0; i < n; i++)
        for (int64_t k = c[i].first_entry; k < c[i].first_entry + c[i].parsed; k++)
            c[i].mirrors += e->row[k] != e->col[k];
    c[0].first_mirror = e->count;
    for (int i = 1; i < n; i++) c[i].first_mirror = c[i - 1].first_mirror + c[i - 1].mirrors;
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int i = 0; i < n; i++) {
        int64_t m = c[i].first_mirror;
        for (int64_t k = c[i].first_entry; k < c[i].first_entry + c[i].parsed; k++) {
            if (e->row[k] == e->col[k]) continue;
            e->row[m] = e->col[k];
            e->col[m] = e->row[k];
            if (e->val) e->val[m] = negate ? -e->val[k] : e->val[k];
            m++;
        }
    }
    e->count = c[n - 1].first_mirror + c[n - 1].mirrors;
}

static int mm_read_entries(const char *path, const mm_text *t, const mm_header *h,
                           mm_entries *e, gs_error *err)
{
    int status = GS_OK, n = 0;
    mm_chunk *c = NULL;
    mm_job job = {path, &h->info, h->expected, 0, 0, e};
    GS_TRY(mm_make_chunks(t->data + h->body, t->data + t->len, h->body_line, &c, &n, err));
    int64_t room = n > 1 ? mm_count_entries(c, n) : mm_max_entries(&h->info, t->len - h->body);
    job.limit = room < h->expected ? room : h->expected;
    GS_TRY(mm_alloc_entries(&h->info, job.limit, 1, e, err));
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int i = 0; i < n; i++) mm_parse_chunk(&job, &c[i]);
    for (int i = 0; i < n; i++) {
        if (c[i].err.status != GS_OK)
            GS_TRY(gs_error_set(err, c[i].err.status, "%s", c[i].err.msg));
        e->count += c[i].parsed;
    }
    if (e->count < h->expected)
        GS_TRY(gs_mm_fail_premature_end(path, mm_last_line(t), h->expected, e->count, err));
    if (h->info.symmetry != GS_MM_GENERAL)
        mm_expand_symmetric(e, c, n, h->info.symmetry == GS_MM_SKEW_SYMMETRIC);
cleanup:
    free(c);
    return status;
}

int gs_mm_fail_premature_end(const char *path, int64_t last_line, int64_t expected,
                             int64_t found, gs_error *err)
{
    return mm_fail(err, GS_ERR_INPUT, path, last_line,
                   "premature end of file: expected %" PRId64 " entries, found %" PRId64,
                   expected, found);
}

void gs_mm_entries_free(mm_entries *e)
{
    free(e->row);
    free(e->col);
    free(e->val);
    memset(e, 0, sizeof *e);
}

/* Stored entries summed into another. With symmetric storage the distinct
 * stored positions are the diagonal plus half the off-diagonal of A. */
static int64_t mm_count_duplicates(const gs_csr *A, const gs_mm_info *in)
{
    if (in->symmetry == GS_MM_GENERAL) return in->entries_stored - A->nnz;
    int64_t diagonal = 0;
#pragma omp parallel for schedule(static) reduction(+ : diagonal) if (A->nnz > MM_PARALLEL_MIN)
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) diagonal += A->col[k] == i;
    return in->entries_stored - (diagonal + (A->nnz - diagonal) / 2);
}

/* ---- public readers ---- */

/* Refuse a matrix whose size line announces more rows than its e->count
 * entries (mirrors included) can reach: some row is empty, so the matrix is
 * singular, and building its row pointers would cost memory and time in
 * proportion to a row count only the header claims (a 100-byte file may
 * announce 10^9 rows). Found with O(count) work: by pigeonhole the first
 * empty row is among the first count + 1. Matrices with empty rows that pass
 * this count are read (the run reports them). */
static int mm_check_rows_reached(const char *path, const mm_header *h, const mm_entries *e,
                                 gs_error *err)
{
    if (h->info.rows <= e->count) return GS_OK;
    unsigned char *seen = gs_calloc((size_t)e->count + 1, 1, "row marks", err);
    if (!seen) return GS_ERR_NOMEM;
    for (int64_t k = 0; k < e->count; k++)
        if (e->row[k] <= e->count) seen[e->row[k]] = 1;
    int64_t empty = 0;
    while (seen[empty]) empty++;
    free(seen);
    gs_mm_head head = {.info = h->info, .body_line = h->body_line};
    return gs_mm_fail_empty_row(path, &head, empty, e->count, err);
}

int gs_mm_fail_empty_row(const char *path, const gs_mm_head *h, int64_t empty, int64_t count,
                         gs_error *err)
{
    return mm_fail(err, GS_ERR_INPUT, path, h->body_line - 1,
                   "row %" PRId64 " has no entries (the size line announces %" PRId64
                   " rows, the file holds %" PRId64 " entries%s: too few to fill every row; "
                   "a matrix with an empty row is singular)",
                   empty + 1, h->info.rows, count,
                   h->info.symmetry == GS_MM_GENERAL ? "" : " with their mirrors");
}

/* An allocation failure is not about a line, but it still names the file. */
static int mm_name_file(const char *path, int status, gs_error *err)
{
    if (status == GS_ERR_NOMEM && err && strncmp(err->msg, path, strlen(path)) != 0)
        gs_error_prefix(err, "%s: ", path);
    return status;
}

int gs_mm_read_csr(const char *path, gs_csr *A, gs_mm_info *info, gs_error *err)
{
    int status = GS_OK;
    mm_text text = {NULL, 0};
    mm_header h;
    mm_entries e = {NULL, NULL, NULL, 0};
    memset(A, 0, sizeof *A);
    if (info) memset(info, 0, sizeof *info);
    GS_TRY(mm_load(path, &text, err));
    GS_TRY(mm_parse_header(path, &text, MM_FOR_MATRIX, &h, err));
    if (info) *info = h.info;
    GS_TRY(mm_read_entries(path, &text, &h, &e, err));
    GS_TRY(mm_check_rows_reached(path, &h, &e, err));
    free(text.data); /* the text is no longer needed: lower the peak */
    text.data = NULL;
    GS_TRY(gs_csr_from_coo((int32_t)h.info.rows, (int32_t)h.info.cols, e.count, e.row, e.col,
                           e.val, A, err));
    if (!A->val) { /* pattern: every entry is 1, duplicates merged, not summed */
        A->val = gs_malloc((size_t)A->nnz * sizeof *A->val, "pattern values", err);
        if (!A->val) GS_TRY(GS_ERR_NOMEM);
#pragma omp parallel for schedule(static) if (A->nnz > MM_PARALLEL_MIN)
        for (int64_t k = 0; k < A->nnz; k++) A->val[k] = 1.0;
    }
    if (info) info->duplicates = mm_count_duplicates(A, &h.info);
cleanup:
    free(text.data);
    gs_mm_entries_free(&e);
    if (status != GS_OK) gs_csr_free(A);
    return mm_name_file(path, status, err);
}

int gs_mm_read_vector(const char *path, double **x, int64_t *n, gs_error *err)
{
    return gs_mm_read_vector_of_length(path, -1, x, n, err);
}

int gs_mm_read_vector_of_length(const char *path, int64_t length, double **x, int64_t *n,
                                gs_error *err)
{
    int status = GS_OK;
    mm_text text = {NULL, 0};
    mm_header h;
    mm_entries e = {NULL, NULL, NULL, 0};
    *x = NULL;
    *n = 0;
    GS_TRY(mm_load(path, &text, err));
    GS_TRY(mm_parse_header(path, &text, MM_FOR_VECTOR, &h, err));
    int64_t len = h.info.rows * h.info.cols;
    if (length >= 0 && len != length) /* before a coordinate vector's len doubles exist */
        GS_TRY(mm_fail(err, GS_ERR_INPUT, path, h.body_line - 1,
                       "a vector of %" PRId64 " entries, expected %" PRId64, len, length));
    GS_TRY(mm_read_entries(path, &text, &h, &e, err));
    if (h.info.is_array) { /* column-major: the values are the vector */
        *x = e.val;
        e.val = NULL;
    } else { /* coordinate: absent entries are 0, duplicates summed */
        *x = gs_calloc((size_t)len, sizeof **x, "vector", err);
        if (!*x) GS_TRY(GS_ERR_NOMEM);
        for (int64_t k = 0; k < e.count; k++) (*x)[h.info.cols == 1 ? e.row[k] : e.col[k]] += e.val[k];
    }
    *n = len;
cleanup:
    free(text.data);
    gs_mm_entries_free(&e);
    return mm_name_file(path, status, err);
}

/* ---- a part of the file per process (gs_mm_read_head, gs_mm_part_*) ----
 * The banner and size line come from the file's first bytes (read in
 * doubling blocks until they hold both); each part reads its byte range and
 * the end of the line the range ends in, counts its lines (pass 1 of the
 * chunked parse), and parses once the counts of the parts before it give
 * its first line and entry numbers: the messages are those of one reader. */

/* Up to len bytes at off; *got < len only at the end of the file. */
static int mm_pread(int fd, const char *path, char *buf, size_t len, int64_t off, size_t *got,
                    gs_error *err)
{
    *got = 0;
    while (*got < len) {
        ssize_t r = pread(fd, buf + *got, len - *got, (off_t)(off + (int64_t)*got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return gs_error_set(err, GS_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        if (r == 0) break;
        *got += (size_t)r;
    }
    return GS_OK;
}

/* Opens path for pread; *regular = 0 for a pipe or device (no ranges). */
static int mm_open_ranges(const char *path, int *fd, int64_t *size, int *regular, gs_error *err)
{
    struct stat st;
    *fd = open(path, O_RDONLY);
    if (*fd < 0) return gs_error_set(err, GS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int e = fstat(*fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (e) {
        close(*fd);
        *fd = -1;
        return gs_error_set(err, GS_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    *regular = S_ISREG(st.st_mode);
    *size = (int64_t)st.st_size;
    return GS_OK;
}

/* 1 if the whole lines t[0, len) hold a banner line and a size line after it. */
static int mm_head_complete(const char *t, size_t len)
{
    const char *end = t + len, *eol = mm_eol(t, end);
    for (const char *p = eol + (eol < end); p < end; p = eol + (eol < end)) {
        eol = mm_eol(p, end);
        if (mm_is_entry(p, eol)) return 1;
    }
    return 0;
}

/* The file's first bytes, cut after their last '\n' (all of them at the
 * end of the file), enough to hold the banner and the size line. */
static int mm_read_first_lines(int fd, const char *path, int64_t size, mm_text *t,
                               int *gzip, gs_error *err)
{
    int status = GS_OK;
    for (size_t want = (size_t)1 << 16;; want *= 2) {
        if ((int64_t)want > size) want = (size_t)size;
        char *grown = gs_realloc(t->data, want + MM_PAD, "file head", err);
        if (!grown) return GS_ERR_NOMEM;
        t->data = grown;
        GS_TRY(mm_pread(fd, path, t->data, want, 0, &t->len, err));
        *gzip = t->len >= 2 && (unsigned char)t->data[0] == 0x1f &&
                (unsigned char)t->data[1] == 0x8b;
        if (*gzip) break;
        const int all = t->len < want || (int64_t)t->len == size;
        size_t cut = t->len;
        while (!all && cut > 0 && t->data[cut - 1] != '\n') cut--;
        if (all || mm_head_complete(t->data, cut)) {
            t->len = cut;
            break;
        }
    }
    memset(t->data + t->len, 0, MM_PAD);
cleanup:
    return status;
}

int gs_mm_read_head(const char *path, gs_mm_head *h, gs_error *err)
{
    int status = GS_OK, fd = -1, regular = 0, gzip = 0;
    mm_text t = {NULL, 0};
    mm_header mh;
    memset(h, 0, sizeof *h);
    GS_TRY(mm_open_ranges(path, &fd, &h->size, &regular, err));
    if (!regular) {
        h->whole = 1;
        goto cleanup;
    }
    GS_TRY(mm_read_first_lines(fd, path, h->size, &t, &gzip, err));
    if (gzip) {
        h->whole = 1;
        goto cleanup;
    }
    GS_TRY(mm_parse_header(path, &t, MM_FOR_MATRIX, &mh, err));
    h->info = mh.info;
    h->expected = mh.expected;
    h->body = (int64_t)mh.body;
    h->body_line = mh.body_line;
    for (size_t i = 0; i < mh.body; i++) h->head_newlines += t.data[i] == '\n';
    char last = '\n';
    size_t got = 0;
    if (h->size > 0) GS_TRY(mm_pread(fd, path, &last, 1, h->size - 1, &got, err));
    h->ends_in_newline = h->size == 0 || last == '\n';
cleanup:
    if (fd >= 0) close(fd);
    free(t.data);
    return status;
}

/* Extends the text buf[0, *len) (file bytes from off) to the end of its
 * last line: blocks are read until one holds a '\n' or the file ends. */
static int mm_finish_line(int fd, const char *path, int64_t off, char **buf, size_t *len,
                          gs_error *err)
{
    enum { BLOCK = 1 << 16 };
    int status = GS_OK;
    for (;;) {
        char *grown = gs_realloc(*buf, *len + BLOCK + MM_PAD, "file part", err);
        if (!grown) return GS_ERR_NOMEM;
        *buf = grown;
        size_t got = 0;
        GS_TRY(mm_pread(fd, path, *buf + *len, BLOCK, off + (int64_t)*len, &got, err));
        const char *nl = memchr(*buf + *len, '\n', got);
        if (nl) {
            *len = (size_t)(nl - *buf) + 1;
            break;
        }
        *len += got;
        if (got < BLOCK) break;
    }
cleanup:
    return status;
}

/* The whole lines that start in the part's byte range [lo, hi) of the body. */
static int mm_read_part_text(int fd, const char *path, const gs_mm_head *h, int part, int parts,
                             gs_mm_part *p, gs_error *err)
{
    int status = GS_OK;
    const int64_t span = h->size - h->body;
    const int64_t lo = h->body + span * part / parts, hi = h->body + span * (part + 1) / parts;
    const int64_t from = lo > h->body ? lo - 1 : lo; /* the byte before lo: does a line start at lo? */
    size_t len = 0, start = 0;
    char *buf = gs_malloc((size_t)(hi - from) + MM_PAD, "file part", err);
    if (!buf) return GS_ERR_NOMEM;
    GS_TRY(mm_pread(fd, path, buf, (size_t)(hi - from), from, &len, err));
    if ((int64_t)len < hi - from)
        GS_TRY(gs_error_set(err, GS_ERR_IO, "%s: cannot read: the file shrank while it was read",
                            path));
    if (lo > h->body) {
        const char *nl = memchr(buf, '\n', len);
        start = nl ? (size_t)(nl - buf) + 1 : len; /* none: no line starts in the range */
    }
    if (start < len && buf[len - 1] != '\n' && hi < h->size)
        GS_TRY(mm_finish_line(fd, path, from, &buf, &len, err));
    memmove(buf, buf + start, len - start);
    p->len = len - start;
    memset(buf + p->len, 0, MM_PAD);
    p->text = buf;
    buf = NULL;
cleanup:
    free(buf);
    return status;
}

int gs_mm_part_read(const char *path, const gs_mm_head *h, int part, int parts, gs_mm_part *p,
                    gs_error *err)
{
    int status = GS_OK, fd = -1, regular = 0;
    int64_t size = 0;
    memset(p, 0, sizeof *p);
    GS_TRY(mm_open_ranges(path, &fd, &size, &regular, err));
    if (size != h->size)
        GS_TRY(gs_error_set(err, GS_ERR_IO, "%s: cannot read: the file changed while it was read",
                            path));
    GS_TRY(mm_read_part_text(fd, path, h, part, parts, p, err));
    mm_chunk *c = NULL;
    GS_TRY(mm_make_chunks(p->text, p->text + p->len, 0, &c, &p->n_chunks, err));
    p->chunks = c;
    p->entries = mm_count_entries(c, p->n_chunks);
    for (int i = 0; i < p->n_chunks; i++) p->lines += c[i].lines;
cleanup:
    if (fd >= 0) close(fd);
    if (status != GS_OK) gs_mm_part_free(p);
    return status;
}

int gs_mm_part_parse(const char *path, const gs_mm_head *h, gs_mm_part *p, int64_t first_line,
                     int64_t first_entry, gs_mm_entries *e, gs_error *err)
{
    int status = GS_OK;
    mm_chunk *c = p->chunks;
    const int64_t end = first_entry + p->entries;
    mm_job job = {path, &h->info, h->expected, end < h->expected ? end : h->expected,
                  first_entry, e};
    memset(e, 0, sizeof *e);
    for (int i = 0; i < p->n_chunks; i++) {
        c[i].first_line += first_line;
        c[i].first_entry += first_entry;
    }
    if (job.limit > first_entry)
        GS_TRY(mm_alloc_entries(&h->info, job.limit - first_entry, 0, e, err));
#pragma omp parallel for schedule(dynamic, 1) if (p->n_chunks > 1)
    for (int i = 0; i < p->n_chunks; i++) mm_parse_chunk(&job, &c[i]);
    for (int i = 0; i < p->n_chunks; i++) {
        if (c[i].err.status != GS_OK)
            GS_TRY(gs_error_set(err, c[i].err.status, "%s", c[i].err.msg));
        e->count += c[i].parsed;
    }
cleanup:
    if (status != GS_OK) gs_mm_entries_free(e);
    return mm_name_file(path, status, err);
}

void gs_mm_part_free(gs_mm_part *p)
{
    free(p->text);
    free(p->chunks);
    memset(p, 0, sizeof *p);
}

/* ---- writing ----
 * Output goes through one big buffer to fwrite or gzwrite; every write and
 * the final close are checked, so a full disk is an error, not a short file. */

typedef struct mm_out {
    const char *path;
    FILE *file;
    gzFile gz;
    char *buf;
    size_t len;
    gs_error *err;
} mm_out;

enum { MM_OUT_BUF = 1 << 20, MM_OUT_LINE = 96 };

static int mm_out_io_error(mm_out *o, const char *verb)
{
    const char *msg = strerror(errno);
    int errnum = Z_ERRNO;
    if (o->gz) {
        const char *zmsg = gzerror(o->gz, &errnum);
        if (errnum != Z_ERRNO && errnum != Z_OK) msg = zmsg;
    }
    return gs_error_set(o->err, GS_ERR_IO, "%s: cannot %s: %s", o->path, verb, msg);
}

static int mm_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int mm_out_open(mm_out *o, const char *path, gs_error *err)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    o->err = err;
    o->buf = gs_malloc(MM_OUT_BUF, "output buffer", err);
    if (!o->buf) return GS_ERR_NOMEM;
    errno = 0;
    if (mm_ends_with(path, ".gz")) o->gz = gzopen(path, "wb");
    else o->file = fopen(path, "wb");
    if (!o->gz && !o->file)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot open for writing: %s", path,
                            errno ? strerror(errno) : "out of memory");
    return GS_OK;
}

static int mm_out_flush(mm_out *o)
{
    if (o->len == 0) return GS_OK;
    errno = 0;
    int ok = o->gz ? gzwrite(o->gz, o->buf, (unsigned)o->len) == (int)o->len
                   : fwrite(o->buf, 1, o->len, o->file) == o->len;
    o->len = 0;
    return ok ? GS_OK : mm_out_io_error(o, "write");
}

/* Make room for one more formatted line. */
static inline int mm_out_reserve(mm_out *o, size_t bytes)
{
    return MM_OUT_BUF - o->len >= bytes ? GS_OK : mm_out_flush(o);
}

static int mm_out_text(mm_out *o, const char *s, size_t n)
{
    while (n > 0) {
        if (o->len == MM_OUT_BUF && mm_out_flush(o) != GS_OK) return GS_ERR_IO;
        size_t take = MM_OUT_BUF - o->len < n ? MM_OUT_BUF - o->len : n;
        memcpy(o->buf + o->len, s, take);
        o->len += take;
        s += take;
        n -= take;
    }
    return GS_OK;
}

/* Flush and close; a failure here (ENOSPC surfaces at close) is an error. */
static int mm_out_close(mm_out *o, int status)
{
    if (status == GS_OK && (o->file || o->gz)) status = mm_out_flush(o);
    if (o->gz) {
        int rc = gzclose_w(o->gz);
        o->gz = NULL;
        if (rc != Z_OK && status == GS_OK)
            status = gs_error_set(o->err, GS_ERR_IO, "%s: cannot write: %s", o->path,
                                  rc == Z_ERRNO ? strerror(errno) : "zlib error at close");
    }
    if (o->file && fclose(o->file) != 0 && status == GS_OK)
        status = gs_error_set(o->err, GS_ERR_IO, "%s: cannot write: %s", o->path, strerror(errno));
    o->file = NULL;
    free(o->buf);
    o->buf = NULL;
    return status;
}

/* The banner, the comment (one `%` line per line of it) and the size line. */
static int mm_out_header(mm_out *o, const char *banner, const char *comment, const char *size)
{
    int status = GS_OK;
    GS_TRY(mm_out_text(o, banner, strlen(banner)));
    for (const char *p = comment; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        GS_TRY(mm_out_text(o, "% ", 2));
        GS_TRY(mm_out_text(o, p, n));
        GS_TRY(mm_out_text(o, "\n", 1));
        p += n + (e != NULL);
    }
    GS_TRY(mm_out_text(o, size, strlen(size)));
cleanup:
    return status;
}

static inline size_t mm_format_index(char *s, int64_t v) /* decimal, no terminator */
{
    char tmp[24];
    size_t n = 0;
    do tmp[n++] = (char)('0' + v % 10); while ((v /= 10) > 0);
    for (size_t i = 0; i < n; i++) s[i] = tmp[n - 1 - i];
    return n;
}

static int mm_out_entry(mm_out *o, int64_t i, int64_t j, const double *v)
{
    int status = mm_out_reserve(o, MM_OUT_LINE);
    if (status != GS_OK) return status;
    char *s = o->buf + o->len;
    size_t n = mm_format_index(s, i);
    s[n++] = ' ';
    n += mm_format_index(s + n, j);
    if (v) n += (size_t)snprintf(s + n, MM_OUT_LINE - n, " %.17g", *v);
    s[n++] = '\n';
    o->len += n;
    return GS_OK;
}

int gs_mm_write_csr(const char *path, const gs_csr *A, int symmetric, const char *comment,
                    gs_error *err)
{
    int status = GS_OK;
    mm_out o;
    char banner[96], size[96];
    int64_t count = 0;
    if (symmetric && A->n_rows != A->n_cols)
        return gs_error_set(err, GS_ERR_INPUT, "%s: cannot write a %d x %d matrix as symmetric",
                            path, (int)A->n_rows, (int)A->n_cols);
    for (int32_t i = 0; i < A->n_rows; i++) /* symmetric: the lower triangle j <= i */
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) count += !symmetric || A->col[k] <= i;
    snprintf(banner, sizeof banner, "%%%%MatrixMarket matrix coordinate %s %s\n",
             A->val ? "real" : "pattern", symmetric ? "symmetric" : "general");
    snprintf(size, sizeof size, "%d %d %" PRId64 "\n", (int)A->n_rows, (int)A->n_cols, count);
    GS_TRY(mm_out_open(&o, path, err));
    GS_TRY(mm_out_header(&o, banner, comment, size));
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            if (!symmetric || A->col[k] <= i)
                GS_TRY(mm_out_entry(&o, (int64_t)i + 1, (int64_t)A->col[k] + 1,
                                    A->val ? &A->val[k] : NULL));
cleanup:
    return mm_out_close(&o, status);
}

int gs_mm_write_vector(const char *path, const double *x, int64_t n, const char *comment,
                       gs_error *err)
{
    int status = GS_OK;
    mm_out o;
    char size[64];
    snprintf(size, sizeof size, "%" PRId64 " 1\n", n);
    GS_TRY(mm_out_open(&o, path, err));
    GS_TRY(mm_out_header(&o, "%%MatrixMarket matrix array real general\n", comment, size));
    for (int64_t i = 0; i < n; i++) {
        GS_TRY(mm_out_reserve(&o, MM_OUT_LINE));
        o.len += (size_t)snprintf(o.buf + o.len, MM_OUT_LINE, "%.17g\n", x[i]);
    }
cleanup:
    return mm_out_close(&o, status);
}

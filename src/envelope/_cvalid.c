/* envelope._cvalid: the validator's ordinary line in C: a chunk of an open text-like block,
 * checked and counted in one pass (spec/envelope-v1.md VF1).
 *
 * One function, take_run(data, start, prefixes, max_bytes), does for a run of lines what
 * the pure-Python reference, Validator._run, does for a line that continues an open block
 * whose deltas the validator does not keep (parts is None: text, thinking, tool_result, or
 * a JSON block past max_payload_bytes): it finds nothing and counts the line. It returns
 * the index of the first line it does not take; that line, and every later one, is the
 * caller's (the Python path, which holds every check).
 *
 * A line is taken only when the reference would take it with no finding and no effect but
 * the count, so that both builds give the same findings (the caller builds `prefixes`
 * from the open blocks that such a line may continue, Validator._fast_prefixes):
 *
 *   - data[i] is bytes (exactly), at most max_bytes long;
 *   - it starts with one of `prefixes` (a tuple of bytes, each the encoding of
 *     {"type":T,"agent":A,"final":false, [ "id":I,"name":N, ] "delta": for an open block);
 *   - then exactly one JSON string: a quote, then bytes that are not a quote, a backslash
 *     or a control below 0x20, or an escape \" \\ \/ \b \f \n \r \t or \uXXXX that is not
 *     a surrogate (a surrogate escape, paired or lone, is left to the Python path, where
 *     the lone-surrogate check of spec 6.4 lives), then a quote; the bytes are strict
 *     UTF-8 (no overlong form, no encoded surrogate, nothing past U+10FFFF);
 *   - then "}" and the end of the line (whitespace, another field: left).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int
cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/* The bytes of one UTF-8 sequence starting at p (a byte of 0x80 or above), strict as
 * Python's decoder; 0 when it is not one. */
static Py_ssize_t
utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    Py_ssize_t left = end - p;
    if (c >= 0xC2 && c <= 0xDF) {
        return (left >= 2 && cont(p[1])) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || !cont(p[1]) || !cont(p[2])) {
            return 0;
        }
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F)) {
            return 0; /* overlong, or an encoded surrogate */
        }
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || !cont(p[1]) || !cont(p[2]) || !cont(p[3])) {
            return 0;
        }
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) {
            return 0; /* overlong, or past U+10FFFF */
        }
        return 4;
    }
    return 0;
}

/* Whether p..end is exactly one JSON string this pass takes, then "}". */
static int
string_then_brace(const unsigned char *p, const unsigned char *end)
{
    if (p >= end || *p != '"') {
        return 0;
    }
    p++;
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') {
            return end - p == 2 && p[1] == '}';
        }
        if (c < 0x20) {
            return 0;
        }
        if (c == '\\') {
            if (end - p < 2) {
                return 0;
            }
            unsigned char e = p[1];
            if (e == 'u') {
                if (end - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5])) {
                    return 0;
                }
                /* \uD800-\uDFFF: a surrogate, paired or lone: the Python path's */
                if ((p[2] == 'd' || p[2] == 'D') && strchr("89abAB" "cdefCDEF", p[3]) != NULL) {
                    return 0;
                }
                p += 6;
                continue;
            }
            if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
                return 0;
            }
            p += 2;
            continue;
        }
        if (c >= 0x80) {
            Py_ssize_t n = utf8_seq(p, end);
            if (n == 0) {
                return 0;
            }
            p += n;
            continue;
        }
        p++;
    }
    return 0;
}

static PyObject *
take_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "take_run(data, start, prefixes: tuple, max_bytes)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[3]);
    if (max_bytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *data = args[0];
    PyObject *prefixes = args[2];
    Py_ssize_t nprefixes = PyTuple_GET_SIZE(prefixes);
    for (Py_ssize_t j = 0; j < nprefixes; j++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(prefixes, j))) {
            PyErr_SetString(PyExc_TypeError, "take_run: each prefix must be bytes");
            return NULL;
        }
    }
    if (!PyList_CheckExact(data) || start < 0) {
        return PyLong_FromSsize_t(start < 0 ? 0 : start); /* any other sequence: the caller's */
    }
    Py_ssize_t count = PyList_GET_SIZE(data);
    Py_ssize_t i = start;
    for (; i < count; i++) {
        PyObject *line = PyList_GET_ITEM(data, i);
        if (!PyBytes_CheckExact(line)) {
            break;
        }
        Py_ssize_t n = PyBytes_GET_SIZE(line);
        if (n > max_bytes) {
            break;
        }
        const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(line);
        Py_ssize_t plen = -1;
        for (Py_ssize_t j = 0; j < nprefixes; j++) {
            PyObject *prefix = PyTuple_GET_ITEM(prefixes, j);
            Py_ssize_t size = PyBytes_GET_SIZE(prefix);
            if (size < n && memcmp(s, PyBytes_AS_STRING(prefix), (size_t)size) == 0) {
                plen = size;
                break;
            }
        }
        if (plen < 0 || !string_then_brace(s + plen, s + n)) {
            break;
        }
    }
    return PyLong_FromSsize_t(i);
}

/* The first byte at or after p (before end) that is LF, CR or 0x80 and above (end if none):
 * eight bytes at a time, then one at a time. */
static const unsigned char *
next_notable(const unsigned char *p, const unsigned char *end)
{
    const uint64_t ones = 0x0101010101010101ULL;
    const uint64_t highs = 0x8080808080808080ULL;
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t lf = x ^ (ones * '\n');
        uint64_t cr = x ^ (ones * '\r');
        /* a byte is flagged when it is LF or CR (zero after the xor) or has its high bit;
         * a false flag can only follow a true one, so the first flag is exact */
        uint64_t hit = ((lf - ones) & ~lf) | ((cr - ones) & ~cr) | x;
        hit &= highs;
        if (hit) {
#if (defined(__GNUC__) || defined(__clang__)) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return p + (__builtin_ctzll(hit) >> 3);
#else
            break;
#endif
        }
        p += 8;
    }
    while (p < end && *p != '\n' && *p != '\r' && *p < 0x80) {
        p++;
    }
    return p;
}

/* Whether the line at q (before end) is one StreamValidator's SSE line checks skip: it
 * starts with "data:", or is blank (LF or CRLF): _OTHER_SSE_LINE's lookahead. */
static int
quiet_line(const unsigned char *q, const unsigned char *end)
{
    if (end - q >= 5 && memcmp(q, "data:", 5) == 0) {
        return 1;
    }
    return q < end && (*q == '\n' || (*q == '\r' && end - q >= 2 && q[1] == '\n'));
}

static PyObject *
scan_span(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "scan_span(chunk: bytes, start, stop)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if (stop == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if (start < 1 || stop < start || stop > size) {
        PyErr_SetString(PyExc_ValueError, "scan_span: need 1 <= start <= stop <= len(chunk)");
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const unsigned char *chunk_end = s + size;
    const unsigned char *end = s + stop;
    int utf8 = 1;
    int lone_cr = 0;
    Py_ssize_t lines = 0;
    Py_ssize_t other = -1;
    /* the LF before the span (the end of the line before it) and each LF in it but the last
     * are followed by a line: the first of those lines that is not quiet is `other` */
    if (s[start - 1] == '\n' && start < stop && !quiet_line(s + start, chunk_end)) {
        other = start - 1;
    }
    const unsigned char *p = s + start;
    while ((p = next_notable(p, end)) < end) {
        unsigned char c = *p;
        if (c == '\n') {
            lines++;
            if (other < 0 && p + 1 < end && !quiet_line(p + 1, chunk_end)) {
                other = p - s;
            }
            p++;
        }
        else if (c == '\r') {
            if (p + 1 >= end || p[1] != '\n') {
                lone_cr = 1;
            }
            p++;
        }
        else {
            Py_ssize_t n = utf8_seq(p, end);
            if (n == 0) {
                utf8 = 0;
                break;
            }
            p += n;
        }
    }
    return Py_BuildValue("(OOnn)", utf8 ? Py_True : Py_False, lone_cr ? Py_True : Py_False, lines, other);
}

static PyMethodDef methods[] = {
    {"take_run", (PyCFunction)(void (*)(void))take_run, METH_FASTCALL,
     "take_run(data, start, prefixes, max_bytes) -> int\n\n"
     "Take the lines data[start:] that continue an open block the validator only counts; the index of the first "
     "line left."},
    {"scan_span", (PyCFunction)(void (*)(void))scan_span, METH_FASTCALL,
     "scan_span(chunk, start, stop) -> (utf8, lone_cr, lines, other)\n\n"
     "One pass over the complete lines chunk[start:stop] for StreamValidator._whole_ok (see _cvalid.pyi)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "envelope._cvalid",
    "The validator's ordinary line in C: a chunk of an open block, checked and counted (see _cvalid.pyi).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__cvalid(void)
{
    return PyModule_Create(&module_def);
}

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as the crc32c package and RFC 3720 define
 * it: initial value and final xor 0xFFFFFFFF, so crc(b"123456789") == 0xE3069283.
 *
 * The CPU's instruction where it has one (SSE 4.2 on x86-64, the CRC extension on ARMv8), chosen
 * once at import; a table of 8 x 256 entries (slicing by 8) everywhere else. Both are tested
 * against each other and the reference, byte for byte, on random inputs. */
#include "../core.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <nmmintrin.h>
#define ADQ_HAVE_X86 1
#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#define ADQ_HAVE_ARM 1
#endif

static uint32_t table[8][256];

static uint32_t crc32c_software(uint32_t crc, const uint8_t *data, size_t length) {
    crc = ~crc;
    while (length >= 8) {
        uint32_t low = adq_load_u32(data) ^ crc;
        uint32_t high = adq_load_u32(data + 4);
        crc = table[7][low & 0xFF] ^ table[6][(low >> 8) & 0xFF] ^ table[5][(low >> 16) & 0xFF] ^
              table[4][low >> 24] ^ table[3][high & 0xFF] ^ table[2][(high >> 8) & 0xFF] ^
              table[1][(high >> 16) & 0xFF] ^ table[0][high >> 24];
        data += 8;
        length -= 8;
    }
    while (length--) crc = table[0][(crc ^ *data++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if ADQ_HAVE_X86
__attribute__((target("sse4.2"))) static uint32_t crc32c_hardware(uint32_t crc, const uint8_t *data,
                                                                    size_t length) {
    uint64_t state = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, data, 8);
        state = _mm_crc32_u64(state, word);
        data += 8;
        length -= 8;
    }
    uint32_t small = (uint32_t)state;
    while (length--) small = _mm_crc32_u8(small, *data++);
    return ~small;
}
#elif ADQ_HAVE_ARM
__attribute__((target("+crc"))) static uint32_t crc32c_hardware(uint32_t crc, const uint8_t *data,
                                                                  size_t length) {
    crc = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, data, 8);
        crc = __crc32cd(crc, word);
        data += 8;
        length -= 8;
    }
    while (length--) crc = __crc32cb(crc, *data++);
    return ~crc;
}
#endif

static uint32_t (*implementation)(uint32_t, const uint8_t *, size_t) = crc32c_software;
static const char *implementation_name = "table";

void adq_crc32c_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int bit = 0; bit < 8; bit++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++) table[k][n] = (table[k - 1][n] >> 8) ^ table[0][table[k - 1][n] & 0xFF];
#if ADQ_HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        implementation = crc32c_hardware;
        implementation_name = "sse4.2";
    }
#elif ADQ_HAVE_ARM
    if (getauxval(AT_HWCAP) & HWCAP_CRC32) {
        implementation = crc32c_hardware;
        implementation_name = "armv8-crc";
    }
#endif
}

uint32_t adq_crc32c(uint32_t crc, const uint8_t *data, size_t length) { return implementation(crc, data, length); }

uint32_t adq_crc32c_table(uint32_t crc, const uint8_t *data, size_t length) {
    return crc32c_software(crc, data, length);
}

const char *adq_crc32c_implementation(void) { return implementation_name; }

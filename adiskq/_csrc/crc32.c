/* CRC-32 as zlib computes it (ISO-HDLC: reflected polynomial 0xEDB88320, initial value and final
 * xor 0xFFFFFFFF): the key index's hash of a key (adiskq/_sansio/keyindex.py), so a batch's key
 * hashes come out of the same C loop as its records. Keys are short; one table lookup a byte. */
#include "core.h"

static uint32_t table[256];

void adq_crc32_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int bit = 0; bit < 8; bit++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
        table[n] = crc;
    }
}

uint32_t adq_crc32(uint32_t crc, const uint8_t *data, size_t length) {
    crc = ~crc;
    while (length--) crc = table[(crc ^ *data++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

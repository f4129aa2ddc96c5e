/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the hash map: u32, string and pointer keys, removal with
 * back-shifting, iteration. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hashmap.h"
#include "unit.h"

START_TEST(test_hashmap_basic) {
        Hashmap h;
        uint32_t keys[1000];

        hashmap_init(&h, &hashmap_u32_ops);
        for (uint32_t i = 0; i < 1000; i++) {
                keys[i] = i * 7919u;
                ck_assert_int_eq(hashmap_put(&h, &keys[i], &keys[i]), 0);
        }
        ck_assert_int_eq(hashmap_put(&h, &keys[3], &keys[3]), -EEXIST);
        ck_assert_uint_eq(hashmap_size(&h), 1000);
        for (uint32_t i = 0; i < 1000; i += 2)
                ck_assert_ptr_eq(hashmap_remove(&h, &keys[i]), &keys[i]);
        for (uint32_t i = 0; i < 1000; i++)
                ck_assert_ptr_eq(hashmap_get(&h, &keys[i]), i % 2 ? &keys[i] : NULL);

        size_t n = 0, it = 0;
        void *v;
        while (hashmap_next(&h, &it, &v))
                n++;
        ck_assert_uint_eq(n, 500);
        hashmap_clear(&h);
}
END_TEST

START_TEST(test_hashmap_strings) {
        Hashmap h;
        hashmap_init(&h, &hashmap_string_ops);
        ck_assert_ptr_null(hashmap_get(&h, ":1.1"));
        ck_assert_int_eq(hashmap_put(&h, ":1.1", (void *) 1), 0);
        ck_assert_int_eq(hashmap_put(&h, ":1.2", (void *) 2), 0);
        char key[] = ":1.2";
        ck_assert_ptr_eq(hashmap_get(&h, key), (void *) 2);
        ck_assert_ptr_eq(hashmap_remove(&h, ":1.1"), (void *) 1);
        ck_assert_ptr_null(hashmap_remove(&h, ":1.1"));
        hashmap_clear(&h);
}
END_TEST

START_TEST(test_hashmap_pointers) {
        Hashmap h;
        int objects[64];

        hashmap_init(&h, &hashmap_ptr_ops);
        for (int i = 0; i < 64; i++)
                ck_assert_int_eq(hashmap_put(&h, &objects[i], &objects[i]), 0);
        int other = 0;
        ck_assert_ptr_null(hashmap_get(&h, &other)); /* identity, not contents */
        for (int i = 0; i < 64; i += 3)
                ck_assert_ptr_eq(hashmap_remove(&h, &objects[i]), &objects[i]);
        for (int i = 0; i < 64; i++)
                ck_assert_ptr_eq(hashmap_get(&h, &objects[i]), i % 3 ? &objects[i] : NULL);
        hashmap_clear(&h);
}
END_TEST

int main(void) {
        Suite *s = suite_create("hashmap");
        TCase *tc = tcase_create("hashmap");
        tcase_add_test(tc, test_hashmap_basic);
        tcase_add_test(tc, test_hashmap_strings);
        tcase_add_test(tc, test_hashmap_pointers);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}

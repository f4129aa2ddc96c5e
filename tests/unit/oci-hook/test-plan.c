/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the OCI hook's plan: annotations to one request (value, a
 * C-state name left to resolve, CPUs, reason), the sandbox and required
 * rules, CRI-O's annotation, the refusals, the confinement to the
 * container's cpuset, and finding the request again by its reason. */

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "oci-state.h"
#include "unit.h"

static char err[OCI_ERR_MAX];

static int plan_of(OciState s, OciPlan *p) {
        if (!s.id)
                s.id = "c1";
        err[0] = 0;
        return oci_plan_make(&s, p, err, sizeof(err));
}

START_TEST(test_latency_and_reason) {
        OciPlan p;
        ck_assert_int_eq(plan_of((OciState){ .latency = "37" }, &p), 0);
        ck_assert(p.act && !p.required && !p.sandbox && !p.cstate && !p.cpus && !p.want_container);
        ck_assert_int_eq(p.usec, 37);
        ck_assert_str_eq(p.reason, "container c1");
        ck_assert_int_eq(plan_of((OciState){ .latency = "2000000000", .required = "true" }, &p), 0);
        ck_assert(p.required);
        ck_assert_int_eq(p.usec, 2000000000);
        ck_assert_int_eq(plan_of((OciState){ .latency = "C1E" }, &p), 0);
        ck_assert_str_eq(p.cstate, "C1E"); /* resolved later, on this machine */
        OciState pod = { .latency = "5", .pod_namespace = "ran", .pod_name = "du\n0", .container_name = "l1" };
        ck_assert_int_eq(plan_of(pod, &p), 0);
        ck_assert_str_eq(p.reason, "container c1 pod ran/du?0 name l1");
        ck_assert(oci_reason_matches(p.reason, "c1"));
        ck_assert(!oci_reason_matches(p.reason, "c"));
        ck_assert(!oci_reason_matches("container c10", "c1"));
        ck_assert(oci_reason_matches("container c1", "c1"));
        OciState containerd = { .latency = "5", .cri_namespace = "ns", .cri_pod = "p" };
        ck_assert_int_eq(plan_of(containerd, &p), 0);
        ck_assert_str_eq(p.reason, "container c1 pod ns/p");
}
END_TEST

START_TEST(test_cpus) {
        OciPlan p;
        ck_assert_int_eq(plan_of((OciState){ .latency = "10", .cpus = "3,0-1" }, &p), 0);
        ck_assert_uint_eq(p.n_cpus, 3);
        ck_assert_uint_eq(p.cpus[0], 0);
        ck_assert_uint_eq(p.cpus[2], 3);
        oci_plan_done(&p);
        ck_assert_ptr_null(p.cpus);
        ck_assert_int_eq(plan_of((OciState){ .latency = "10", .cpus = "container" }, &p), 0);
        ck_assert(p.want_container && !p.cpus);
}
END_TEST

START_TEST(test_sandbox_and_crio) {
        OciPlan p;
        /* A pod's pause container gets nothing, whatever the annotations say (even bad ones). */
        ck_assert_int_eq(plan_of((OciState){ .latency = "x!", .required = "maybe", .cri_type = "sandbox" }, &p), 0);
        ck_assert(p.sandbox && !p.act && !p.required);
        ck_assert_int_eq(plan_of((OciState){ .latency = "5", .crio_type = "sandbox" }, &p), 0);
        ck_assert(p.sandbox && !p.act);
        ck_assert_int_eq(plan_of((OciState){ .crio = "enable" }, &p), 0);
        ck_assert(!p.act);
        ck_assert_int_eq(plan_of((OciState){ .crio = "disable" }, &p), 0);
        ck_assert(p.act && p.want_container);
        ck_assert_int_eq(p.usec, 0);
        ck_assert_int_eq(plan_of((OciState){ .crio = "max_latency:7" }, &p), 0);
        ck_assert_int_eq(p.usec, 7);
        ck_assert_int_eq(plan_of((OciState){ 0 }, &p), 0);
        ck_assert(!p.act);
}
END_TEST

START_TEST(test_refusals) {
        static const OciState bad[] = {
                { .latency = "fast!" },
                { .latency = "5 us" },
                { .latency = "5us" },
                { .latency = "" },
                { .latency = "5", .cpus = "9-1" },
                { .cpus = "0" },
                { .crio = "max_latency:x" },
                { .crio = "off" },
                { .latency = "5", .required = "yes" },
        };
        OciPlan p;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(plan_of(bad[i], &p) == -EINVAL, "case %zu was taken", i);
                ck_assert_msg(err[0], "case %zu: no reason given", i);
                oci_plan_done(&p);
        }
        /* A typo in required fails the container: required is set before the refusal. */
        ck_assert_int_eq(plan_of((OciState){ .latency = "5", .required = "ture" }, &p), -EINVAL);
        ck_assert(p.required);
        ck_assert_int_eq(plan_of((OciState){ .latency = "2000000001" }, &p), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "at most 2000000000"));
        ck_assert_int_eq(plan_of((OciState){ .latency = "99999999999999999999999" }, &p), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "at most 2000000000"));
        ck_assert_int_eq(plan_of((OciState){ .latency = "bad\x1b[0m" }, &p), -EINVAL);
        ck_assert_ptr_null(strchr(err, '\x1b')); /* shown, never printed raw */
}
END_TEST

START_TEST(test_confine) {
        OciPlan p;
        ck_assert_int_eq(plan_of((OciState){ .latency = "5", .cpus = "1" }, &p), 0);
        ck_assert_int_eq(oci_plan_confine(&p, "1-2", "0-7", false, "/etc/x.conf", err, sizeof(err)), 0);
        ck_assert_int_eq(oci_plan_confine(&p, "2-3", "0-7", false, "/etc/x.conf", err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "outside the container's cpuset"));
        ck_assert_int_eq(oci_plan_confine(&p, "2-3", "0-7", true, "/etc/x.conf", err, sizeof(err)), -EPERM);
        ck_assert_int_eq(oci_plan_confine(&p, "x", "0-7", false, "/etc/x.conf", err, sizeof(err)), -EINVAL);
        oci_plan_done(&p);
        /* The whole machine only with MachineWide=allow: no list, or no cpuset. */
        ck_assert_int_eq(plan_of((OciState){ .latency = "5" }, &p), 0);
        ck_assert_int_eq(oci_plan_confine(&p, "0-3", "0-7", false, "/etc/x.conf", err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "/etc/x.conf"));
        ck_assert_int_eq(oci_plan_confine(&p, "0-3", "0-7", true, "/etc/x.conf", err, sizeof(err)), 0);
        ck_assert_int_eq(plan_of((OciState){ .latency = "5", .cpus = "container" }, &p), 0);
        ck_assert_int_eq(oci_plan_confine(&p, "0-3", "0-7", false, "/etc/x.conf", err, sizeof(err)), 0);
        ck_assert_int_eq(oci_plan_confine(&p, NULL, "0-7", false, "/etc/x.conf", err, sizeof(err)), -EPERM);
        ck_assert_int_eq(oci_plan_confine(&p, " ", "0-7", true, "/etc/x.conf", err, sizeof(err)), 0);
        /* A cpuset of every online CPU is the whole machine too (and so is not
         * knowing which are online). */
        ck_assert_int_eq(oci_plan_confine(&p, "0-3", "0-3", false, "/etc/x.conf", err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "every online CPU"));
        ck_assert_int_eq(oci_plan_confine(&p, "0-3", "0-3", true, "/etc/x.conf", err, sizeof(err)), 0);
        ck_assert_int_eq(oci_plan_confine(&p, "0-3", NULL, false, "/etc/x.conf", err, sizeof(err)), -EPERM);
        ck_assert_int_eq(plan_of((OciState){ .crio = "enable" }, &p), 0); /* nothing asked: nothing to refuse */
        ck_assert_int_eq(oci_plan_confine(&p, NULL, "0-7", false, "/etc/x.conf", err, sizeof(err)), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("oci-plan");
        TCase *tc = tcase_create("oci-plan");
        tcase_add_test(tc, test_latency_and_reason);
        tcase_add_test(tc, test_cpus);
        tcase_add_test(tc, test_sandbox_and_crio);
        tcase_add_test(tc, test_refusals);
        tcase_add_test(tc, test_confine);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}

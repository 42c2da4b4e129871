/* A program outside the tree that uses the installed library. */
#include <stdio.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/domain.h>

int main(void)
{
    struct npv_ctx *ctx;
    int ret = npv_ctx_new(&ctx);
    if (ret < 0) {
        fprintf(stderr, "npv_ctx_new: %s\n", npv_strerror(ret));
        return 1;
    }
    struct npv_domain *dom;
    ret = npv_domain_new(ctx, NULL, &dom);
    if (ret < 0) {
        fprintf(stderr, "npv_domain_new: %s\n", npv_strerror(ret));
        npv_ctx_free(ctx);
        return 1;
    }
    npv_domain_put(dom);
    printf("npuvfio %s\n", npv_version());
    npv_ctx_free(ctx);
    return strcmp(npv_version(), "") == 0;
}

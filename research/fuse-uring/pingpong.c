#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){int n=atoi(argv[1]);int a[2],b[2];pipe(a);pipe(b);char c=0;
 if(fork()==0){for(int i=0;i<n;i++){read(a[0],&c,1);write(b[1],&c,1);}_exit(0);}
 double t0=now();for(int i=0;i<n;i++){write(a[1],&c,1);read(b[0],&c,1);}double dt=now()-t0;wait(0);
 printf("pipe ping-pong round trip: %.2f us\n",dt/n);}
